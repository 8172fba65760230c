"""The apiserver's watch history is bounded by bytes: large Configs written many times push the oldest changes
out, and a watcher resuming from one of them is told to relist (Expired), as after a compaction."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import Expired
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.etcd import EtcdServer

KIND_CAP = 4 * 1024 * 1024
DATA = {f"k{i}": "x" * (60 * 1024) for i in range(8)}  # a 480 KiB Config


@pytest.fixture
async def small_history(etcd: EtcdServer) -> AsyncIterator[RunningApiServer]:
    async with apiserver(etcd.endpoint, history_kind_bytes=KIND_CAP, history_bytes=2 * KIND_CAP) as running:
        yield running


async def test_large_updates_stay_under_the_cap_and_a_watcher_behind_relists(small_history: RunningApiServer) -> None:
    async with Client(small_history.address, timeout=10) as client:
        config = await client.configs.create(
            v1.Config(metadata=v1.ObjectMeta(name="big"), spec=v1.ConfigSpec(data=DATA))
        )
        first = config.metadata.resource_version
        for i in range(30):
            config.spec.data["k0"] = str(i) + "x" * (60 * 1024 - 8)
            config = await client.configs.update(config)
        service = small_history.server.service
        assert service is not None
        history = (await service.watch_cache("configs")).history
        assert 0 < history.bytes <= KIND_CAP
        assert len(history) < 10  # far fewer than the 31 changes written
        with pytest.raises(Expired, match="too old resource version"):
            async for _ in client.configs.watch(resource_version=first):
                pass
        changes = client.configs.watch(resource_version=str(history.oldest))  # within the window: replayed
        change = await anext(aiter(changes))
        assert int(change.object.metadata.resource_version) > history.oldest
        await changes.aclose()  # type: ignore[attr-defined]  # an async generator
