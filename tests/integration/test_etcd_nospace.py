"""etcd out of space: writes fail with one clear line, /readyz says why, and the documented recovery works
(a real etcd with a tiny `--quota-backend-bytes`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator

import aiohttp
import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import ApiError, ResourceExhausted
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

NO_SPACE_MESSAGE = "etcd is out of space (NOSPACE alarm); see docs/fleet.md"
QUOTA_BYTES = 2 * 1024 * 1024
VALUES = {f"k{i}": "x" * (60 * 1024) for i in range(4)}  # 240 KiB per Config


@pytest.fixture
async def small_etcd() -> AsyncIterator[EtcdServer]:
    async with EtcdServer(extra_args=("--quota-backend-bytes", str(QUOTA_BYTES))) as server:
        yield server


async def _readyz(api: RunningApiServer) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{api.server.metrics_port}/readyz") as response,
    ):
        return response.status, await response.text()


async def _fill(client: Client) -> ApiError:
    """Write until etcd refuses; the refusal."""
    for index in range(200):
        config = v1.Config(metadata=v1.ObjectMeta(name=f"filler-{index}"), spec=v1.ConfigSpec(data=VALUES))
        try:
            await client.configs.create(config)
        except ApiError as exc:
            return exc
    raise AssertionError("etcd never ran out of space")


def _etcdctl(endpoint: str, *args: str) -> str:
    env = {**os.environ, "ETCDCTL_API": "3"}
    done = subprocess.run(
        ["etcdctl", f"--endpoints={endpoint}", *args], capture_output=True, text=True, env=env, timeout=30, check=True
    )
    return done.stdout


def _recover(endpoint: str) -> None:
    """The recovery of docs/fleet.md: compact to the current revision, defragment, disarm."""
    status = _etcdctl(endpoint, "endpoint", "status", "--write-out=fields")
    revision = next(line.split(":")[1].strip() for line in status.splitlines() if '"Revision"' in line)
    _etcdctl(endpoint, "compact", revision)
    _etcdctl(endpoint, "defrag")
    _etcdctl(endpoint, "alarm", "disarm")


async def test_out_of_space_is_named_on_writes_and_readyz_until_recovered(small_etcd: EtcdServer) -> None:
    async with (
        apiserver(small_etcd.endpoint, metrics_listen="127.0.0.1:0") as api,
        Client(api.address, timeout=10, retry_timeout=5) as client,
    ):
        assert await _readyz(api) == (200, "ok\n")
        refused = await _fill(client)
        assert isinstance(refused, ResourceExhausted), refused
        assert NO_SPACE_MESSAGE in str(refused)
        assert await _readyz(api) == (503, f"not ready: {NO_SPACE_MESSAGE}\n")

        # Free space as the docs say: delete what filled it, then compact, defragment and disarm.
        for config in await client.configs.list():
            await client.configs.delete(config.metadata.name)
        await asyncio.to_thread(_recover, small_etcd.endpoint)

        async def ready() -> bool:
            return (await _readyz(api))[0] == 200

        await wait_for(ready, timeout=10, message="/readyz ok after recovery")
        await client.configs.create(
            v1.Config(metadata=v1.ObjectMeta(name="after"), spec=v1.ConfigSpec(data={"k": "v"}))
        )
