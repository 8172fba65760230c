"""Control-plane losses under load: the etcd leader killed during 500 acknowledged writes, one apiserver killed
while clients write and read. Every acknowledged write is there afterwards, exactly once; watches resume
without relisting; the figures are printed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from fleet_helpers import QUICK_STOP, wait_running

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.client.resumable import Listed, ResumableWatch
from caravanserai.errors import AlreadyExists, CaravanseraiError
from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for
from support.fleet import Fleet

WRITES = 500
WRITERS = 5


class Load:
    """`WRITERS` tasks creating `WRITES` projects between them (each retried until acknowledged), and a
    resumable watch that must see every one of them without relisting."""

    def __init__(self, client: Client, prefix: str) -> None:
        self.client = client
        self.names = [f"{prefix}-{i}" for i in range(WRITES)]
        self.acknowledged: set[str] = set()
        self.failed_requests = 0  # errors that reached our code (each then retried)
        self.seen: set[str] = set()
        self.lists = 0

    async def write(self, index: int) -> None:
        for name in self.names[index::WRITERS]:
            ambiguous = False
            while name not in self.acknowledged:
                try:
                    await self.client.projects.create(builders.project(name, labels={"load": "yes"}))
                    self.acknowledged.add(name)
                except AlreadyExists:
                    assert ambiguous, f"{name} exists although no attempt to create it failed"
                    self.acknowledged.add(name)  # the failed attempt had been carried out
                except CaravanseraiError:
                    self.failed_requests += 1
                    ambiguous = True
                    await asyncio.sleep(0.2)

    async def watch(self) -> None:
        watch = ResumableWatch(self.client.projects, label_selector="load=yes")
        async with contextlib.aclosing(watch.changes()) as changes:
            async for item in changes:
                if isinstance(item, Listed):
                    self.lists += 1
                    self.seen.update(p.metadata.name for p in item.objects)
                elif item.type == "ADDED":
                    self.seen.add(item.object.metadata.name)

    async def run(self, fault: Callable[[], Awaitable[None]], *, after: int) -> None:
        watcher = asyncio.create_task(self.watch())
        await wait_for(lambda: self.lists == 1, 20, message="watch listed")
        writers = [asyncio.create_task(self.write(i)) for i in range(WRITERS)]
        await wait_for(lambda: len(self.acknowledged) >= after, 60, interval=0.01, message=f"{after} writes")
        await fault()
        await asyncio.wait_for(asyncio.gather(*writers), 120)
        try:
            await wait_for(lambda: self.seen >= set(self.names), 30, message="watch saw every write")
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def stored(self) -> list[str]:
        return [p.metadata.name for p in await self.client.projects.list(label_selector="load=yes")]


async def _cleanup(client: Client, names: list[str]) -> None:
    for name in names:
        await client.projects.delete(name, force=True)


async def test_killing_the_etcd_leader_during_500_writes_loses_nothing(fleet: Fleet) -> None:
    async with fleet.client(timeout=10, retry_timeout=30) as client:
        load = Load(client, "etcd-kill")
        leader = await fleet.etcd.leader()

        async def kill_leader() -> None:
            await leader.process.kill()

        await load.run(kill_leader, after=150)
        stored = await load.stored()
        print(
            f"etcd leader {leader.name} killed: {len(load.acknowledged)} acknowledged, "
            f"{len(set(load.names) - set(stored))} lost, {load.failed_requests} requests failed, "
            f"watch lists {load.lists}"
        )
        assert sorted(stored) == sorted(load.names)  # all present, none twice
        assert load.lists == 1  # the watch resumed without a relist
        new_leader = await fleet.etcd.leader()
        assert new_leader is not leader
        await _cleanup(client, stored)


async def test_killing_one_apiserver_under_load_loses_and_fails_nothing(fleet: Fleet) -> None:
    async with fleet.client(timeout=10, retry_timeout=30) as client:
        load = Load(client, "api-kill")

        async def kill_apiserver() -> None:
            await fleet.apiservers[0].kill()

        await load.run(kill_apiserver, after=150)
        stored = await load.stored()
        print(
            f"apiserver killed: {len(load.acknowledged)} acknowledged, "
            f"{len(set(load.names) - set(stored))} lost, {load.failed_requests} requests failed, "
            f"watch lists {load.lists}"
        )
        assert sorted(stored) == sorted(load.names)
        assert load.lists == 1
        assert load.failed_requests == 0
        await _cleanup(client, stored)
        nodes = await client.nodes.list()
        assert all(n.status.state == v1.NODE_READY for n in nodes)  # the agents failed over too
        # and the controllers: a new project is scheduled and runs with one apiserver gone
        await client.projects.create(builders.project("after-kill", image=fleet.config.image, command=QUICK_STOP))
        await wait_running(client, ["after-kill"])
