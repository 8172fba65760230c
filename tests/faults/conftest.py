"""Fault fixtures: processes we are allowed to kill (their own etcd, apiservers, agents and controllers as
subprocesses), the Docker test image, and removal of every Docker object of a test's nodes."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fault_processes import Processes, remove_labelled

from caravanserai.testing import free_port
from caravanserai.testing.docker import ensure_test_image
from caravanserai.testing.etcd import EtcdServer
from support.processes import ApiProcess


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


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[Processes]:
    """Start child processes with `await processes.start(name, argv)`; all are stopped after the test and the
    tails of their logs printed (pytest shows them when the test fails)."""
    started = Processes(tmp_path)
    try:
        yield started
    finally:
        await started.stop_all()
        print(started.logs(), file=sys.stderr)


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The local busybox test image (built once, never pulled); skips the test when no Docker engine answers."""
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False).returncode != 0:
        pytest.skip("no Docker engine answers; run scripts/start-dockerd.sh")
    return ensure_test_image()


@pytest.fixture
async def docker_nodes(docker_image: str, processes: Processes) -> AsyncIterator[set[str]]:
    """Node names a test runs agents for: after the test its processes are stopped (no agent may create anything
    any more), then every Docker object labelled for these nodes is removed."""
    nodes: set[str] = set()
    try:
        yield nodes
    finally:
        await processes.stop_all()
        for node in sorted(nodes):
            await asyncio.to_thread(remove_labelled, node)
