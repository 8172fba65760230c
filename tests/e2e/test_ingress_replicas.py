"""Zero failed requests through the ingress while a real ProjectSet is rolled out, fails a bad rollout and is
drained (with a single project handed over), and while a single project is updated start-first; a start-first
replacement that never becomes healthy is said in an Event and the service's status while the old one serves.

Two real agents; the real scheduler, ProjectSet controller and garbage collector in a Manager (as
cara-controller-manager runs them); the set is created through the API and placed by them. A client process
(`request_stream.py`) sends a constant 50 requests per second through the ingress of one agent and counts every
request that does not answer 200. The set's phases share one test: starting the agents is the slow part.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE

import pytest
from agent_harness import RunningAgent, StartAgent, bind
from test_ingress import SERVE

from caravanserai import meta, v1
from caravanserai.cli.describe_project import service_status_rows
from caravanserai.cli.rollout import undo_target
from caravanserai.client import Client, nodeops
from caravanserai.client.apply import modify
from caravanserai.client.budgets import move_within_budgets
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.projectset import app as projectset_app
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.project.replicas import owning_set, template_hash
from caravanserai.testing.builders import project
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

RATE = 50.0  # requests per second
HOST = "app.example.com"
SOLO = "solo.example.com"
REPLICAS = 4


@dataclass
class Stream:
    """What the request stream counted: answered 200, and every other outcome (status or exception)."""

    ok: int = 0
    failures: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def request_stream(agent: RunningAgent, *hosts: str) -> AsyncIterator[Stream]:
    """GET /index.html through `agent`'s ingress at `RATE` per second (hosts in turn) until the block ends, from a
    process of its own (`request_stream.py`); the counts are filled in when the block ends."""
    url = f"http://127.0.0.1:{agent.agent.ingress_port}/index.html"
    script = str(Path(__file__).with_name("request_stream.py"))
    process = await asyncio.create_subprocess_exec(
        sys.executable, script, url, str(RATE), *hosts, stdin=PIPE, stdout=PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    stream = Stream()
    try:
        assert (await asyncio.wait_for(process.stdout.readline(), 30)).strip() == b"streaming"
        yield stream
    finally:
        process.stdin.close()
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    counts = json.loads(output)
    stream.ok, stream.failures = counts["ok"], counts["failures"]


def serve(spec: v1.ProjectSpec, image: str, *, revision: str, host: str) -> None:
    """One service `web` answering on 8080 (`REVISION` in its environment), behind a Public ingress on `host`, with
    a tcp health check: a copy is ready only once it listens."""
    web = spec.services.add(name="web", image=image, command=["sh", "-c", SERVE])
    web.env.add(name="REVISION", value=revision)
    check = web.healthcheck
    check.tcp.port, check.interval, check.timeout, check.retries = 8080, "1s", "1s", 3
    ingress = spec.ingress.add(name="site", host=host)
    ingress.target.service, ingress.target.port = "web", 8080
    ingress.access.scope = "Public"


# ---- a ProjectSet ----------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def controllers(client: Client) -> AsyncIterator[None]:
    """The scheduler, the ProjectSet controller and the garbage collector, in one Manager, for the block."""
    clock = SystemClock()
    manager = Manager(client, clock=clock, shutdown_timeout=5.0)
    scheduler_app.setup(manager, client, clock)
    projectset_app.setup(manager, client, clock)
    gc_app.setup(manager, client, clock, gc_app.GCOptions())
    async with running(manager):
        yield


def web_set(name: str, image: str) -> v1.ProjectSet:
    """`REPLICAS` serving replicas, rolled with maxSurge 2 and maxUnavailable 0, drained one at a time."""
    obj = v1.ProjectSet()
    obj.metadata.name = name
    obj.spec.replicas = REPLICAS
    obj.spec.selector.match_labels["app"] = name
    obj.spec.template.labels["app"] = name
    serve(obj.spec.template.spec, image, revision="1", host=HOST)
    obj.spec.strategy.rolling_update.max_surge = "2"
    obj.spec.strategy.rolling_update.max_unavailable = "0"
    obj.spec.disruption_budget.max_unavailable = "1"
    return obj


class Replicas:
    """Reads of one set and its replicas."""

    def __init__(self, client: Client, name: str) -> None:
        self.client, self.name = client, name

    async def active(self) -> list[v1.Project]:
        """The replicas not being deleted (and not Terminated)."""
        return [
            p
            for p in (await self.client.projects.list()).items
            if owning_set(p) == self.name
            and not p.metadata.HasField("deletion_timestamp")
            and p.status.phase not in nodeops.LEAVING
        ]

    async def settled(self, revision: str) -> bool:
        """Every replica is of `revision` and available, and the set says so."""
        s = (await self.client.projectsets.get(self.name)).status
        return s.update_revision == s.current_revision == revision and s.available_replicas == REPLICAS == s.replicas

    async def change(self, edit: Callable[[v1.ProjectSet], bool]) -> v1.ProjectSet:
        """Write `edit` of the set (read-modify-write, as caractrl's edits)."""
        updated, _ = await modify(self.client.projectsets, self.name, edit)
        stored: v1.ProjectSet = updated
        return stored


def of(replicas: list[v1.Project], revision: str) -> list[v1.Project]:
    return [p for p in replicas if p.metadata.labels[v1.TEMPLATE_HASH_LABEL] == revision]


def served(p: v1.Project) -> bool:
    return p.status.phase == v1.RUNNING and all(s.ready for s in p.status.services)


async def test_a_projectset_rolls_out_stops_a_bad_rollout_and_drains_without_dropping_a_request(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agents = [
        await start_agent(node=n, hostname=n) for n in (f"rs-a-{uuid.uuid4().hex[:6]}", f"rs-b-{uuid.uuid4().hex[:6]}")
    ]
    name = f"web-{uuid.uuid4().hex[:6]}"
    sets = Replicas(client, name)
    async with controllers(client):
        await client.projectsets.create(web_set(name, image))
        first = template_hash(web_set(name, image).spec.template)
        await wait_for(lambda: sets.settled(first), 60, message="the set's first revision available")
        assert {p.status.node_ref for p in await sets.active()} == {a.node for a in agents}  # spread by default

        # (a) A rolling update: every replica reaches the new revision; no request fails.
        def second_revision(obj: v1.ProjectSet) -> bool:
            obj.spec.template.spec.services[0].env[0].value = "2"
            return True

        async with request_stream(agents[0], HOST) as rolling:
            await asyncio.sleep(0.5)
            second = template_hash((await sets.change(second_revision)).spec.template)
            await wait_for(lambda: sets.settled(second), 60, message="the rolling update done")
            await asyncio.sleep(0.5)
        assert rolling.failures == [] and rolling.ok > 2 * RATE
        rolled = await sets.active()
        assert len(rolled) == REPLICAS and all(served(p) for p in of(rolled, second)) and of(rolled, second) == rolled

        # (c) A template whose container never becomes healthy: marked failed after the deadline, nothing more
        # replaced, the old replicas serve on.
        def never_healthy(obj: v1.ProjectSet) -> bool:
            obj.spec.template.spec.services[0].command[:] = ["sleep", "3600"]  # never listens on 8080
            obj.spec.progress_deadline_seconds = 3
            return True

        async with request_stream(agents[0], HOST) as bad:
            bad_revision = template_hash((await sets.change(never_healthy)).spec.template)

            async def failed() -> v1.ProjectSet | None:
                s = await client.projectsets.get(name)
                condition = meta.get_condition(s.status.conditions, v1.CONDITION_PROGRESSING)
                stopped = condition is not None and condition.reason == v1.REASON_PROGRESS_DEADLINE_EXCEEDED
                return s if stopped else None

            stopped = await wait_for(failed, 30, message="the bad rollout marked failed")
            held = await sets.active()
            await asyncio.sleep(2)  # past the deadline: nothing is created or deleted any more
            later = await sets.active()
        assert bad.failures == [] and bad.ok > 2 * RATE
        progressing = meta.get_condition(stopped.status.conditions, v1.CONDITION_PROGRESSING)
        assert (
            progressing is not None and progressing.status == v1.FALSE and "no progress for 3s" in progressing.message
        )
        assert stopped.status.update_revision == bad_revision and stopped.status.current_revision == second
        assert {p.metadata.name for p in later} == {p.metadata.name for p in held}
        assert len(of(later, bad_revision)) == 2 and not any(served(p) for p in of(later, bad_revision))  # the surge
        assert len(of(later, second)) == REPLICAS and all(served(p) for p in of(later, second))
        warnings = [e for e in (await client.events.list()).items if e.spec.involved_object.name == name]
        assert any(e.spec.reason == v1.REASON_PROGRESS_DEADLINE_EXCEEDED and e.spec.type == "Warning" for e in warnings)

        # The node to drain next: the one with more replicas (the undo keeps them where they are), with a single
        # project of its own too (placed there by the scheduler while the other node is cordoned).
        drained = max(agents, key=lambda a: sum(p.status.node_ref == a.node for p in of(later, second)))
        other = agents[1] if drained is agents[0] else agents[0]
        await nodeops.set_unschedulable(client, other.node, True)
        solo = project("solo", services=[])
        serve(solo.spec, image, revision="1", host=SOLO)
        await client.projects.create(solo)

        def undo(obj: v1.ProjectSet) -> bool:  # `caractrl rollout undo`
            obj.spec.template.CopyFrom(undo_target(obj, 0).template)
            return True

        await sets.change(undo)
        await wait_for(lambda: sets.settled(second), 30, message="the undo done, the bad replicas gone")
        assert (
            await wait_for(lambda: ready(client, "solo"), 30, message="project solo ready")
        ).status.node_ref == drained.node
        await nodeops.set_unschedulable(client, other.node, False)

        # (b) A drain (as `caractrl drain`: cordon, then moves within the budget of one unavailable replica; the
        # single project at once, served by its old copy until the new one is ready): every replica and the single
        # project end up on the other node; no request fails.
        waits: list[str] = []
        async with request_stream(other, HOST, SOLO) as draining:
            await asyncio.sleep(0.5)
            assert await nodeops.set_unschedulable(client, drained.node, True)
            bound = list(await client.projects.list(field_selector=f"status.nodeRef={drained.node}"))
            movable = [p for p in bound if meta.key_of(p) in nodeops.movable_projects(bound, drained.node)]
            moves = await move_within_budgets(
                client,
                drained.node,
                movable,
                clock=SystemClock(),
                handoff=60,
                timeout=60,
                waiting=waits.append,
                poll=0.2,
            )

            async def all_moved() -> bool:
                now = [*await sets.active(), await client.projects.get("solo")]
                moved = all(p.status.node_ref == other.node and not p.status.previous_node_ref for p in now)
                return moved and served(now[-1]) and await sets.settled(second)

            await wait_for(all_moved, 60, message="every replica on the other node, available")
            await asyncio.sleep(0.5)
        assert draining.failures == [] and draining.ok > 2 * RATE
        assert sorted(moves.moved) == sorted(meta.key_of(p) for p in movable) and not moves.refused
        assert len(movable) >= 3 and waits and "disruption budget keeps 3" in waits[0]  # replicas one at a time
        after = (await client.projectsets.get(name)).status  # a drain is no rollout: no deadline ran out
        progressing = meta.get_condition(after.conditions, v1.CONDITION_PROGRESSING)
        assert progressing is not None and progressing.status == v1.TRUE, progressing


# ---- a single project ------------------------------------------------------------------------------------------


async def test_a_start_first_update_drops_no_request_and_a_failed_one_is_said(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    one, two = await start_agent(), await start_agent()
    single = project("single", services=[])
    serve(single.spec, image, revision="1", host="single.example.com")
    single.spec.update.order = v1.UPDATE_START_FIRST
    await client.projects.create(single)
    await bind(client, "single", two.node)
    before = await wait_for(lambda: ready(client, "single"), 30, message="project single ready")
    async with request_stream(one, "single.example.com") as stream:
        await asyncio.sleep(1)
        changed = meta.copy(before)
        changed.spec.services[0].env[0].value = "2"
        await client.projects.update(changed)

        async def replaced() -> v1.Project | None:
            p = await client.projects.get("single")
            service = p.status.services[0]
            new = service.ready and service.container_id != before.status.services[0].container_id
            return p if new else None

        serving = await wait_for(replaced, timeout=30, message="the service replaced start-first")
        await asyncio.sleep(0.5)

        # A replacement that never becomes healthy: said in an Event and the service's status; the old one serves.
        def never_healthy(obj: v1.Project) -> bool:
            obj.spec.services[0].command[:] = ["sleep", "3600"]  # never listens on 8080
            return True

        await modify(client.projects, "single", never_healthy)

        async def said() -> tuple[v1.Project, v1.Event] | None:
            p = await client.projects.get("single")
            found = [e for e in (await client.events.list()).items if e.spec.reason == "StartFirstFailed"]
            return (p, found[0]) if found and p.status.services[0].waiting_for else None

        failed, event = await wait_for(said, timeout=30, message="the failed start-first replacement said")
        await asyncio.sleep(0.5)
    assert stream.failures == [] and stream.ok > 2 * RATE
    assert event.spec.type == "Warning" and event.spec.involved_object.name == "single"
    why = "service web: its new container did not pass its health check within 4s (start-first)"
    assert why in event.spec.message and "the old container keeps serving" in event.spec.message
    status = failed.status.services[0]
    assert status.container_id == serving.status.services[0].container_id and status.ready
    assert status.waiting_for.startswith("a healthy replacement: " + why) and status.message.startswith("waiting for")
    row = service_status_rows(failed.status.services)[0]  # what `caractrl describe project` shows
    assert row[-2] == status.waiting_for and row[-1] == status.message


async def ready(client: Client, name: str) -> v1.Project | None:
    p = await client.projects.get(name)
    return p if served(p) and not p.status.previous_node_ref else None
