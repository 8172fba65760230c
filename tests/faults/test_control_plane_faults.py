"""Real processes killed with SIGKILL: etcd during acknowledged writes, the apiserver during watches, and two
apiservers over one etcd. Nothing acknowledged is lost; watchers miss and repeat nothing."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import AlreadyExists, ApiError, Conflict
from caravanserai.informer import Informer, WatchOptions
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for
from support.processes import ApiProcess


async def test_etcd_killed_during_500_acknowledged_writes(own_etcd: EtcdServer) -> None:
    acknowledged: set[str] = set()
    async with apiserver(own_etcd.endpoint) as api, Client(api.address, retry_timeout=20, timeout=5) as c:
        informer: Informer[v1.Project] = Informer(c.projects, watch_options=WatchOptions(idle_timeout=5))
        watching = asyncio.create_task(informer.run())
        await informer.wait_synced()

        async def writer(worker: int) -> None:
            for i in range(worker, 500, 10):
                name = f"w{i:03d}"
                while name not in acknowledged:
                    try:
                        await c.projects.create(project(name))
                        acknowledged.add(name)
                    except AlreadyExists:
                        stored = await c.projects.get(name)  # applied, reply lost: it is there
                        acknowledged.add(stored.metadata.name)
                    except ApiError:
                        await asyncio.sleep(0.2)  # etcd down: not acknowledged, try again

        writers = asyncio.gather(*(writer(w) for w in range(10)))
        await wait_for(lambda: len(acknowledged) >= 100, 30)
        own_etcd.kill()
        await asyncio.sleep(1.5)
        await own_etcd.restart()
        await asyncio.wait_for(writers, 120)

        stored = {p.metadata.name for p in (await c.projects.list()).items}
        assert len(acknowledged) == 500
        assert acknowledged <= stored
        await wait_for(
            lambda: {p.metadata.name for p in informer.list()} == stored,
            30,
            message="informer converges after the etcd restart",
        )
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching


async def test_apiserver_killed_during_watch_nothing_missed_or_repeated(etcd, api_process: ApiProcess) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    delivered: list[tuple[str, str, str]] = []
    written: list[tuple[str, str]] = []
    async with Client(api_process.address, retry_timeout=30) as c:
        informer: Informer[v1.Project] = Informer(c.projects, watch_options=WatchOptions(idle_timeout=3))

        def record(kind: str) -> Any:
            return lambda *objs: delivered.append((kind, objs[-1].metadata.name, objs[-1].metadata.resource_version))

        informer.add_event_handler(on_add=record("add"), on_update=record("update"), on_delete=record("delete"))
        watching = asyncio.create_task(informer.run())
        await informer.wait_synced()
        async with apiserver(etcd.endpoint, prefix=api_process.prefix) as second, Client(second.address) as w:
            for i in range(5):
                p = await w.projects.create(project(f"k{i}"))
                written.append((p.metadata.name, p.metadata.resource_version))
            await wait_for(lambda: len(delivered) >= 5, 10)
            api_process.kill()  # SIGKILL mid-stream
            for i in range(5):  # changes while the watched apiserver is dead
                p = await w.projects.get(f"k{i}")
                p.metadata.labels["round"] = "2"
                p = await w.projects.update(p)
                written.append((p.metadata.name, p.metadata.resource_version))
            await w.projects.delete("k0")
            await asyncio.sleep(1)
            await api_process.start()  # same address: the informer resumes from its last version
            await wait_for(lambda: len(delivered) >= len(written) + 1, 30, message="every change delivered")
            await asyncio.sleep(1)  # anything repeated would arrive now
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    changes = [(name, rv) for kind, name, rv in delivered if kind != "delete"]
    assert sorted(changes) == sorted(written), f"missing or repeated: {delivered}"
    assert [(kind, name) for kind, name, _ in delivered if kind == "delete"] == [("delete", "k0")]


async def test_two_apiservers_over_one_etcd_are_consistent(etcd) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    async with (
        apiserver(etcd.endpoint) as a,
        apiserver(etcd.endpoint, prefix=a.prefix) as b,
        Client(a.address) as ca,
        Client(b.address) as cb,
    ):
        for i in range(20):
            p = await ca.projects.create(project(f"c{i}"))
            seen = await cb.projects.get(f"c{i}")  # read-your-write across apiservers
            assert seen.metadata.resource_version == p.metadata.resource_version
            p.metadata.labels["via"] = "a"
            p = await ca.projects.update(p)
            stale = meta_copy(seen)
            stale.metadata.labels["via"] = "b"
            with pytest.raises(Conflict):
                await cb.projects.update(stale)  # the first apiserver's write is seen by the second
        la, lb = await ca.projects.list(), await cb.projects.list()
        assert [o.metadata.resource_version for o in la.items] == [o.metadata.resource_version for o in lb.items]


def meta_copy(obj: v1.Project) -> v1.Project:
    out = v1.Project()
    out.CopyFrom(obj)
    return out
