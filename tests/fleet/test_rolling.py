"""Rolling the control plane: every etcd member, apiserver and controller manager restarted one at a time while
projects are created and deleted; afterwards the state is exactly what was asked."""

from __future__ import annotations

import asyncio

from fleet_helpers import QUICK_STOP, all_containers, copies

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import AlreadyExists, CaravanseraiError, NotFound
from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for
from support.fleet import Fleet

LIVE = 12


class Churn:
    """Creates `roll-<i>` projects and, beyond `LIVE` of them, deletes the oldest, until stopped; `wanted` is the
    set that must exist afterwards; `failed_requests` counts errors that reached this code (each then retried),
    `errors` says which. A repeated create answered AlreadyExists (or delete answered NotFound) was carried out
    by the attempt whose answer was lost: done (names are never reused), and counted by that attempt's error."""

    def __init__(self, client: Client, image: str) -> None:
        self.client, self.image = client, image
        self.wanted: set[str] = set()
        self.deleted: set[str] = set()
        self.failed_requests = 0
        self.errors: list[str] = []
        self.stop = asyncio.Event()

    async def _retry(self, call: object, done_already: type[CaravanseraiError]) -> None:
        repeated = False
        while True:
            try:
                await call()  # type: ignore[operator]  # call is an async callable, typed object
                return
            except done_already:
                if repeated:
                    return
                raise
            except CaravanseraiError as exc:
                self.failed_requests += 1
                self.errors.append(f"{type(exc).__name__}: {exc}")
                repeated = True
                await asyncio.sleep(0.3)

    async def run(self) -> None:
        index = 0
        while not self.stop.is_set():
            name = f"roll-{index}"
            project = builders.project(name, image=self.image, command=QUICK_STOP, requests={"cpu": "10m"})
            await self._retry(lambda project=project: self.client.projects.create(project), AlreadyExists)
            self.wanted.add(name)
            if len(self.wanted) > LIVE:
                victim = min(self.wanted, key=lambda n: int(n.split("-")[1]))
                await self._retry(lambda victim=victim: self.client.projects.delete(victim), NotFound)
                self.wanted.discard(victim)
                self.deleted.add(victim)
            index += 1
            await asyncio.sleep(0.3)


async def test_rolling_restart_of_the_control_plane_keeps_the_asked_state(fleet: Fleet) -> None:
    async with fleet.client(timeout=10, retry_timeout=30) as client:
        churn = Churn(client, fleet.config.image)
        task = asyncio.create_task(churn.run())
        await asyncio.sleep(2.0)
        for member in fleet.etcd.members:
            await member.process.stop()
            await fleet.etcd.start_member(member)
            await asyncio.sleep(1.0)
        for apiserver in fleet.apiservers:
            await apiserver.stop()
            await apiserver.start()
            await fleet.wait_serving()
            await asyncio.sleep(1.0)
        for controllers in fleet.controllers:
            await controllers.stop()
            await controllers.start()
            await asyncio.sleep(2.0)
        churn.stop.set()
        await asyncio.wait_for(task, 60)
        print(
            f"rolling restart: {len(churn.wanted)} projects kept, {len(churn.deleted)} deleted, "
            f"{churn.failed_requests} requests failed"
        )

        async def settled() -> bool:
            projects = {p.metadata.name: p for p in await client.projects.list()}
            if set(projects) != churn.wanted:
                return False
            if any(p.status.phase != v1.RUNNING for p in projects.values()):
                return False
            return await all_containers(fleet) == len(churn.wanted)

        await wait_for(settled, 90, interval=0.5, message="exactly the asked projects, each Running once")
        for name in sorted(churn.wanted):
            assert sum(len(rows) for rows in (await copies(fleet, name)).values()) == 1, name
        assert churn.failed_requests == 0, churn.errors
