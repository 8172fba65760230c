"""Fault fixtures: processes we are allowed to kill (their own etcd, apiservers as subprocesses)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.processes import ApiProcess, free_port


@pytest.fixture
async def own_etcd() -> AsyncIterator[EtcdServer]:
    """An etcd of this test's own, which it may kill."""
    async with EtcdServer() as server:
        yield server


@pytest.fixture
async def api_process(etcd: EtcdServer) -> AsyncIterator[ApiProcess]:
    proc = ApiProcess(etcd.endpoint, prefix=f"/faults-{os.getpid()}-{free_port()}")
    await proc.start()
    try:
        yield proc
    finally:
        await proc.stop()
