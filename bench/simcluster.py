"""The simulated cluster the scheduler benchmarks share: Nodes with Leases renewed by this process, and the watch
that records when each project is first seen bound."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import timestamp
from caravanserai.errors import Conflict
from caravanserai.testing.builders import lease, node, node_status


async def run_concurrently(count: int, workers: int, op: Callable[[int], Awaitable[Any]]) -> None:
    async def worker(first: int) -> None:
        for i in range(first, count, workers):
            await op(i)

    await asyncio.gather(*(worker(w) for w in range(workers)))


class SimulatedNodes:
    """Nodes and their Leases; `renew_forever` renews every Lease once per cycle from one task."""

    def __init__(self, client: Client, count: int) -> None:
        self.client = client
        self.names = [f"node-{i:05d}" for i in range(count)]
        self.leases: dict[str, v1.Lease] = {}
        self.renewals = 0
        self.max_lag_s = 0.0

    async def create(self) -> None:
        async def one(i: int) -> None:
            name = self.names[i]
            created = await self.client.nodes.create(node(name))
            await self.client.nodes.update_status(node_status(created, cpu="4", memory="8Gi"))
            fresh = lease(name)
            fresh.spec.renew_time.CopyFrom(timestamp(time.time()))
            self.leases[name] = await self.client.leases.create(fresh)

        await run_concurrently(len(self.names), 64, one)

    async def renew(self, name: str) -> None:
        current = meta.copy(self.leases[name])
        current.spec.renew_time.CopyFrom(timestamp(time.time()))
        try:
            self.leases[name] = await self.client.leases.update(current)
        except Conflict:
            self.leases[name] = await self.client.leases.get(name)
        self.renewals += 1

    async def renew_forever(self, cycle: float, *, in_flight: int = 128) -> None:
        """Renew every Lease once per `cycle`, each at its own moment of the cycle (evenly spread), up to `in_flight`
        renewals outstanding: a slow reply delays the renewals behind it only once that many wait, never the pace
        (renewing 16 at a time and waiting for all 16 made a loaded apiserver's latency stretch the cycle past the
        heartbeat timeout at 20,000 nodes, and every node looked down). `max_lag_s`: the latest any renewal
        started after its moment."""
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(in_flight)
        pending: set[asyncio.Task[None]] = set()

        async def one(name: str) -> None:
            try:
                await self.renew(name)
            finally:
                slots.release()

        try:
            while True:
                started = loop.time()
                for index, name in enumerate(self.names):
                    await asyncio.sleep(max(0.0, started + cycle * index / len(self.names) - loop.time()))
                    await slots.acquire()
                    self.max_lag_s = max(self.max_lag_s, loop.time() - (started + cycle * index / len(self.names)))
                    task = asyncio.create_task(one(name))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                await asyncio.sleep(max(0.0, started + cycle - loop.time()))
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)


class BindWatch:
    """Records when each project is first seen Scheduled on a watch. Waiting costs nothing per binding beyond a set
    removal: the waiter is woken once, when the last of its names is bound (a scan of every name on every binding
    took a millisecond of the machine per binding from the stack being measured)."""

    def __init__(self) -> None:
        self.bound_at: dict[str, float] = {}
        self._waiting: set[str] = set()
        self._all_bound = asyncio.Event()

    async def run(self, client: Client) -> None:
        start = (await client.projects.list(limit=1)).resource_version
        async for event in client.projects.watch(resource_version=start):
            p = event.object
            if event.type != v1.BOOKMARK and p.status.phase == v1.SCHEDULED:
                name = p.metadata.name
                if name not in self.bound_at:
                    self.bound_at[name] = time.perf_counter()
                    waiting = self._waiting
                    if name in waiting:
                        waiting.discard(name)
                        if not waiting:
                            self._all_bound.set()

    async def wait_all(self, names: list[str], timeout: float) -> None:
        """Return once every one of `names` was seen bound (one waiter at a time); TimeoutError after `timeout`."""
        self._waiting = {n for n in names if n not in self.bound_at}
        if not self._waiting:
            return
        self._all_bound.clear()
        try:
            await asyncio.wait_for(self._all_bound.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"{len(self._waiting)} projects not bound within {timeout:g}s") from None
        finally:
            self._waiting = set()


__all__ = ["BindWatch", "SimulatedNodes", "run_concurrently"]
