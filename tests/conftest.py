"""Fixtures shared by every test tier: one real etcd for the session, and a store with its own key prefix."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from caravanserai.storage import EtcdClient, Store
from caravanserai.logging import configure_logging
from caravanserai.testing import EtcdServer

# The plugin's fixtures (cara_etcd, cara_apiserver, cara_client, fake_clock), named here too so that the suite
# runs in an environment installed before the plugin's entry point existed.
from caravanserai.testing.plugin import cara_apiserver, cara_client, cara_etcd, fake_clock  # noqa: F401

# Logs of in-process servers go to stderr (pytest shows them for failing tests), never into captured stdout.
configure_logging("info", json=False)


@pytest.fixture(scope="session")
def etcd(cara_etcd: EtcdServer) -> EtcdServer:
    """The session's real etcd server (loopback ports, temporary data dir): the plugin's `cara_etcd`."""
    return cara_etcd


@pytest.fixture
async def etcd_client(etcd: EtcdServer) -> AsyncIterator[EtcdClient]:
    """A client of the session's etcd, closed after the test."""
    async with EtcdClient([etcd.endpoint], dial_timeout=10.0) as client:
        yield client


@pytest.fixture
def store(etcd_client: EtcdClient) -> Store:
    """A store under a prefix of its own, so tests never see each other's objects."""
    return Store(etcd_client, prefix=f"/test-{uuid.uuid4().hex[:12]}")
