"""caractrl's lifecycle commands against a real apiserver over a real etcd: drain moves projects (with a hand-off
to the drained node), restart stamps services, and wait knows a changed Failed project is not hopeless."""

from __future__ import annotations

import asyncio
from pathlib import Path

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, seconds
from caravanserai.project import lifecycle
from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


async def ready_node(client: Client, name: str) -> None:
    node = await client.nodes.create(builders.node(name))
    await client.nodes.update_status(builders.node_status(node))


async def running_on(client: Client, name: str, node: str) -> v1.Project:
    p = await client.projects.get(name)
    p = await client.projects.update_status(lifecycle.bind(p, node, now=CLOCK.now()))
    return await client.projects.update_status(
        lifecycle.run(p, reason="ContainersRunning", message="up", now=CLOCK.now())
    )


async def test_drain_moves_projects_with_a_hand_off_and_waits_for_them_elsewhere(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await ready_node(client, "n2")
    for name in ("web", "db", "done"):
        await client.projects.create(builders.project(name))
        await running_on(client, name, "n1")
    done = await client.projects.get("done")
    await client.projects.update_status(lifecycle.succeed(done, reason="Completed", message="ok", now=CLOCK.now()))

    async def scheduler() -> None:  # what cara-scheduler would do: place the moved projects on n2
        placed: set[str] = set()
        while placed != {"web", "db"}:
            for p in (await client.projects.list(field_selector="status.phase=Pending")).items:
                await running_on(client, p.metadata.name, "n2")
                placed.add(p.metadata.name)
            await asyncio.sleep(0.1)

    before = CLOCK.now()
    placing = asyncio.create_task(scheduler())
    result = await cli("drain", "n1", "--timeout", "2m")
    await placing
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "node/n1 cordoned"
    assert "project/db moving off node/n1" in result.stdout and "project/web running on node/n2" in result.stdout
    assert result.stdout.splitlines()[-1] == "node/n1 drained"
    web = await client.projects.get("web")
    assert (web.status.node_ref, web.status.previous_node_ref) == ("n2", "")  # Running again: hand-off over
    events = [c for c in web.status.conditions if c.type == v1.CONDITION_SCHEDULED]
    assert events and events[0].reason == "Scheduled"
    assert (await client.projects.get("done")).status.phase == v1.SUCCEEDED  # finished: left alone
    assert (await client.nodes.get("n1")).spec.unschedulable
    assert CLOCK.now() - before < 60


async def test_drain_waits_past_scheduled_and_reports_a_project_that_failed_on_its_new_node(
    cli: Caractrl, client: Client
) -> None:
    await ready_node(client, "n1")
    await ready_node(client, "n2")
    for name in ("web", "api"):
        await client.projects.create(builders.project(name))
        await running_on(client, name, "n1")

    async def scheduler_then_agent() -> None:  # both bound to n2 at once; web runs, api fails to start there
        for name in ("web", "api"):
            pending = await wait_for(lambda n=name: _in_phase(client, n, v1.PENDING), 10, message=f"{name} Pending")
            await client.projects.update_status(lifecycle.bind(pending, "n2", now=CLOCK.now()))
        await asyncio.sleep(1.5)  # longer than drain's poll: it must not take Scheduled for arrived
        web = await client.projects.get("web")
        await client.projects.update_status(
            lifecycle.run(web, reason="ContainersRunning", message="up", now=CLOCK.now())
        )
        api = await client.projects.get("api")
        failure = "service app: Bind for 0.0.0.0:8080 failed: port is already allocated"
        await client.projects.update_status(
            lifecycle.fail(api, reason="ContainerFailed", message=failure, now=CLOCK.now())
        )

    helper = asyncio.create_task(scheduler_then_agent())
    result = await cli("drain", "n1", "--timeout", "1m")
    await helper
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "project/web running on node/n2" in result.stdout
    assert "node/n1 drained" not in result.stdout  # not drained: one of its projects runs nowhere
    assert result.stderr.splitlines() == [
        "error: project/api failed: Failed on node/n2: ContainerFailed: "
        "service app: Bind for 0.0.0.0:8080 failed: port is already allocated"
    ]


async def test_drain_timeout_bounds_the_wait_and_says_where_each_late_project_is(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await ready_node(client, "n2")
    await client.projects.create(builders.project("web"))
    await running_on(client, "web", "n1")

    async def scheduler() -> None:  # binds it to n2, whose agent never starts it
        pending = await wait_for(lambda: _in_phase(client, "web", v1.PENDING), 10, message="web Pending")
        await client.projects.update_status(lifecycle.bind(pending, "n2", now=CLOCK.now()))

    helper = asyncio.create_task(scheduler())
    before = CLOCK.now()
    result = await cli("drain", "n1", "--timeout", "3s")
    await helper
    assert result.exit_code == 1
    assert result.stderr == "error: not running elsewhere after 3s: web (Scheduled on node/n2)\n"
    assert CLOCK.now() - before < 20


async def test_restart_move_wait_ends_when_the_only_node_takes_it_back(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await client.projects.create(builders.project("web"))
    await running_on(client, "web", "n1")

    async def scheduler() -> None:  # no other node fits: the project goes back to the node it left
        await wait_for(lambda: _in_phase(client, "web", v1.PENDING), 10, message="web Pending")
        await running_on(client, "web", "n1")

    helper = asyncio.create_task(scheduler())
    result = await cli("restart", "web", "--move", "--wait", "--timeout", "30s")
    await helper
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "project/web running on node/n1"


async def _in_phase(client: Client, name: str, phase: str) -> v1.Project | None:
    project = await client.projects.get(name)
    return project if project.status.phase == phase else None


async def test_drain_without_waiting_leaves_the_hand_off_on_the_project(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await client.projects.create(builders.project("web"))
    await running_on(client, "web", "n1")
    now = CLOCK.now()
    result = await cli("drain", "n1", "--no-wait", "--timeout", "90s")
    assert result.stdout.splitlines() == ["node/n1 cordoned", "project/web moving off node/n1", "node/n1 drained"]
    web = await client.projects.get("web")
    assert (web.status.phase, web.status.node_ref, web.status.previous_node_ref) == (v1.PENDING, "", "n1")
    assert abs(seconds(web.status.handoff_deadline) - (now + 90)) < 10
    phase = meta.get_condition(web.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "NodeDrained"


async def test_restart_stamps_the_named_services_or_all(cli: Caractrl, client: Client) -> None:
    await client.projects.create(builders.project("app", services=["web", "db"]))
    one = await cli("restart", "project", "app", "web")
    assert one.stdout == "project/app restarted (web; generation 2)\n"
    app = await client.projects.get("app")
    assert app.spec.services[0].HasField("restarted_at") and not app.spec.services[1].HasField("restarted_at")
    every = await cli("restart", "project", "app")
    assert every.stdout == "project/app restarted (all services; generation 3)\n"
    app = await client.projects.get("app")
    assert all(s.HasField("restarted_at") for s in app.spec.services)
    wrong = await cli("restart", "project", "app", "cache")
    assert (wrong.exit_code, wrong.stderr) == (1, "error: project app has no service cache (it has web, db)\n")
    missing = await cli("restart", "project", "nope")
    assert (missing.exit_code, missing.stderr) == (1, 'Error from server (NotFound): projects "nope" not found\n')
    assert (await client.projects.get("app")).metadata.generation == 3


async def test_wait_keeps_waiting_for_a_failed_project_whose_spec_changed(cli: Caractrl, client: Client) -> None:
    await client.projects.create(builders.project("web"))
    p = await running_on(client, "web", "n1")
    p.status.observed_generation = 1
    p = await client.projects.update_status(
        lifecycle.fail(p, reason="ContainerExited", message="exit 1", now=CLOCK.now())
    )
    await cli("restart", "project", "web")
    waiting = asyncio.create_task(cli("wait", "project", "web", "--for", "phase=Pending", "--timeout", "20s"))
    await asyncio.sleep(0.5)
    p = await client.projects.get("web")
    await client.projects.update_status(
        lifecycle.return_to_pending(p, reason="SpecChanged", message="changed", now=CLOCK.now())
    )
    assert (await waiting).stdout == "project/web condition met\n"


APP = """\
apiVersion: caravanserai/v1
kind: Project
metadata: {name: app}
spec:
  services:
  - {name: web, image: busybox:test}
"""


async def test_apply_of_the_unchanged_manifest_keeps_a_restart(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    manifest = tmp_path / "app.yaml"
    manifest.write_text(APP)
    assert (await cli("apply", "-f", str(manifest))).stdout == "project/app created\n"
    await cli("restart", "project", "app")
    assert (await cli("apply", "-f", str(manifest))).stdout == "project/app unchanged\n"
    app = await client.projects.get("app")
    assert app.spec.services[0].HasField("restarted_at") and app.metadata.generation == 2
