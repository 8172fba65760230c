"""Fixtures shared by every test tier: one real etcd for the session, and a store with its own key prefix."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from caravanserai.storage import EtcdClient, Store
from caravanserai.logging import configure_logging
from caravanserai.testing import EtcdServer

# Logs of in-process servers go to stderr (pytest shows them for failing tests), never into captured stdout.
configure_logging("info", json=False)


@pytest.fixture(scope="session")
async def etcd() -> AsyncIterator[EtcdServer]:
    """A real etcd server (loopback ports, temporary data dir) shared by the whole session."""
    async with EtcdServer() as server:
        yield server


@pytest.fixture
async def etcd_client(etcd: EtcdServer) -> AsyncIterator[EtcdClient]:
    """A client of the session's etcd, closed after the test."""
    async with EtcdClient([etcd.endpoint], dial_timeout=10.0) as client:
        yield client


@pytest.fixture
def store(etcd_client: EtcdClient) -> Store:
    """A store under a prefix of its own, so tests never see each other's objects."""
    return Store(etcd_client, prefix=f"/test-{uuid.uuid4().hex[:12]}")
