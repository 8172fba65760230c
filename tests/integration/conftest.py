"""Integration fixtures: a real apiserver (in process, port 0) over the session's real etcd, and a client."""

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
