"""Integration fixtures: a real apiserver (in process, port 0) over the session's real etcd, a client of it, and a
client of a second apiserver over the same store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caravanserai.client import Client
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.etcd import EtcdServer


@pytest.fixture
async def api(etcd: EtcdServer) -> AsyncIterator[RunningApiServer]:
    async with apiserver(etcd.endpoint, bookmark_interval=0.2) as running:
        yield running


@pytest.fixture
async def client(api: RunningApiServer) -> AsyncIterator[Client]:
    async with Client(api.address, timeout=10, retry_timeout=10) as c:
        yield c


@pytest.fixture
async def second_api(api: RunningApiServer, etcd: EtcdServer) -> AsyncIterator[Client]:
    """A client of a second apiserver over the same store (its own companion locks: only etcd's guards hold)."""
    async with (
        apiserver(etcd.endpoint, prefix=api.prefix, bookmark_interval=0.2) as other,
        Client(other.address, timeout=10, retry_timeout=10) as c,
    ):
        yield c
