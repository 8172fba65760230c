"""The workload lifecycle on real Docker: jobs that finish, dependsOn order, health checks, crash loops, recovery
from Failed, restarts and drains. Intervals are short so every test stays within seconds."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, container_ids, docker, wait_phase

from caravanserai import meta, v1
from caravanserai.cli.tables import restarts, services_ready
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.placement import app as placement_app
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.testing.builders import project
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

CLOCK = SystemClock()
CARACTRL = str(Path(sysconfig.get_path("scripts")) / "caractrl")
WEB = ["sh", "-c", "echo ok > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]


def service(p: v1.Project, name: str, image: str, command: list[str], *, policy: str = "") -> v1.Service:
    svc = p.spec.services.add(name=name, image=image, restart_policy=policy)
    svc.command.extend(command)
    return svc


def empty(name: str) -> v1.Project:
    p = project(name)
    del p.spec.services[:]
    return p


@contextlib.asynccontextmanager
async def controllers(client: Client) -> AsyncIterator[None]:
    """The scheduler and placement upkeep, in process, until the block exits."""
    manager = Manager(client, clock=CLOCK, shutdown_timeout=5.0)
    scheduler_app.setup(manager, client, CLOCK)
    placement_app.setup(manager, client, CLOCK, placement_app.PlacementOptions(handoff_timeout=60))
    async with running(manager):
        yield


def ctl(server: str, *args: str) -> str:
    result = subprocess.run([CARACTRL, "--server", server, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result.stdout


async def service_status(client: Client, name: str, svc: str) -> v1.ServiceStatus | None:
    p = await client.projects.get(name)
    return next((s for s in p.status.services if s.name == svc), None)


async def events(client: Client, name: str, reason: str) -> list[v1.Event]:
    found = (await client.events.list()).items
    return [e for e in found if e.spec.involved_object.name == name and e.spec.reason == reason]


async def test_a_job_project_succeeds(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    p = empty("job")
    service(p, "migrate", image, ["sh", "-c", "echo migrated"], policy="Never")
    service(p, "report", image, ["sh", "-c", "echo reported"], policy="OnFailure")
    await client.projects.create(p)
    await bind(client, "job", agent.node)
    done = await wait_phase(client, "job", v1.SUCCEEDED, timeout=30)
    assert [(s.name, s.state, s.exit_code) for s in done.status.services] == [
        ("migrate", "completed", 0),
        ("report", "completed", 0),
    ]
    phase = meta.get_condition(done.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "Completed"
    await asyncio.sleep(1.0)
    assert (await client.projects.get("job")).status.phase == v1.SUCCEEDED  # final: never rescheduled
    await client.projects.delete("job")  # Terminating: the agent removes the exited containers
    await wait_phase(client, "job", v1.TERMINATED, timeout=20)
    assert not container_ids(f"{NODE_LABEL}={agent.node}")


async def test_compose_style_app_starts_web_only_once_db_is_healthy(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    p = empty("shop")
    db = service(p, "db", image, ["sh", "-c", "sleep 2; echo up > /tmp/ready; exec sleep 3600"])
    db.healthcheck.exec.command.extend(["cat", "/tmp/ready"])
    db.healthcheck.interval, db.healthcheck.retries, db.healthcheck.start_period = "300ms", 1, "10s"
    web = service(p, "web", image, WEB)
    web.depends_on.add(service="db", condition="healthy")
    web.healthcheck.http.port, web.healthcheck.http.path = 8080, "/index.html"
    web.healthcheck.interval = "300ms"
    await client.projects.create(p)
    await bind(client, "shop", agent.node)

    async def web_waits() -> v1.ServiceStatus | None:
        status = await service_status(client, "shop", "web")
        return status if status is not None and status.state == "waiting" else None

    waiting = await wait_for(web_waits, timeout=20, message="web waiting for db")
    assert (waiting.waiting_for, waiting.container_id) == ("db to be healthy", "")
    db_status = await service_status(client, "shop", "db")
    assert db_status is not None and db_status.health != "healthy"

    async def all_ready() -> v1.Project | None:
        current = await client.projects.get("shop")
        ready = meta.get_condition(current.status.conditions, v1.CONDITION_READY)
        return current if ready is not None and ready.status == v1.TRUE else None

    shop = await wait_for(all_ready, timeout=30, message="db healthy and web healthy")
    assert shop.status.phase == v1.RUNNING and services_ready(shop) == "2/2"
    assert [(s.name, s.health) for s in shop.status.services] == [("db", "healthy"), ("web", "healthy")]
    started = {
        name: docker("inspect", "-f", "{{.State.StartedAt}}", cid)
        for name, cid in container_ids(f"{NODE_LABEL}={agent.node}").items()
    }
    db_name = next(n for n in started if "_db_" in n)
    web_name = next(n for n in started if "_web_" in n)
    assert started[web_name] > started[db_name]


async def test_a_service_waits_for_a_job_to_complete_and_the_project_stays_running(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    p = empty("migrated")
    service(p, "migrate", image, ["sh", "-c", "sleep 2; echo migrated"], policy="OnFailure")
    web = service(p, "web", image, ["sleep", "3600"])
    web.depends_on.add(service="migrate", condition="completed")
    await client.projects.create(p)
    await bind(client, "migrated", agent.node)

    async def web_waits() -> v1.ServiceStatus | None:
        status = await service_status(client, "migrated", "web")
        return status if status is not None and status.state == "waiting" else None

    waiting = await wait_for(web_waits, timeout=20, message="web waiting for migrate")
    assert waiting.waiting_for == "migrate to complete"
    running = await wait_phase(client, "migrated", v1.RUNNING, timeout=30)
    assert [(s.name, s.state) for s in running.status.services] == [("migrate", "completed"), ("web", "running")]
    assert services_ready(running) == "2/2"  # a completed job counts as ready and does not hold the project back
    ready = meta.get_condition(running.status.conditions, v1.CONDITION_READY)
    assert ready is not None and ready.status == v1.TRUE
    await asyncio.sleep(1.0)
    assert (await client.projects.get("migrated")).status.phase == v1.RUNNING


async def test_failing_http_healthcheck_restarts_the_service_and_degrades_the_project(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    p = empty("sick")
    web = service(p, "web", image, WEB)
    web.healthcheck.http.port, web.healthcheck.http.path = 8080, "/missing"
    web.healthcheck.interval, web.healthcheck.timeout, web.healthcheck.retries = "300ms", "1s", 2
    await client.projects.create(p)
    await bind(client, "sick", agent.node)

    async def degraded() -> v1.Project | None:
        current = await client.projects.get("sick")
        cond = meta.get_condition(current.status.conditions, v1.CONDITION_DEGRADED)
        restarted = current.status.services and current.status.services[0].restart_count >= 1
        return current if cond is not None and cond.status == v1.TRUE and restarted else None

    sick = await wait_for(degraded, timeout=30, message="an unhealthy restart and Degraded")
    cond = meta.get_condition(sick.status.conditions, v1.CONDITION_DEGRADED)
    # Unhealthy at first; after three quick restarts the service also counts as crash-looping
    assert cond is not None and cond.reason in ("Unhealthy", "CrashLoop") and "service web" in cond.message
    assert not sick.status.services[0].ready
    assert await wait_for(lambda: events(client, "sick", "Unhealthy"), timeout=10)
    assert sick.status.phase == v1.RUNNING  # the process is alive; Ready and Degraded tell the rest


async def test_crash_loop_is_visible(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    p = empty("loop")
    service(p, "app", image, ["sh", "-c", "echo starting; exit 3"])
    service(p, "side", image, ["sleep", "3600"])
    await client.projects.create(p)
    await bind(client, "loop", agent.node)

    async def looping() -> v1.Project | None:
        current = await client.projects.get("loop")
        app = next((s for s in current.status.services if s.name == "app"), None)
        return current if app is not None and app.state == "crashloop" else None

    loop = await wait_for(looping, timeout=30, message="app crash-looping")
    app = loop.status.services[0]
    assert app.last_exit_code == 3 and app.restart_count >= 3 and "last exit code 3" in app.message
    cond = meta.get_condition(loop.status.conditions, v1.CONDITION_DEGRADED)
    assert cond is not None and (cond.status, cond.reason) == (v1.TRUE, "CrashLoop")
    assert int(restarts(loop)) >= 3
    crash_events = await wait_for(lambda: events(client, "loop", "CrashLoop"), timeout=10)
    assert crash_events[0].spec.type == "Warning"


FIXME = """\
apiVersion: caravanserai/v1
kind: Project
metadata: {{name: fixme}}
spec:
  services:
  - name: job
    image: {image}
    command: {command}
    restartPolicy: {policy}
"""


async def test_failed_project_recovers_when_a_fixed_manifest_is_applied(
    client: Client, start_agent: StartAgent, image: str, api: object, tmp_path: Path
) -> None:
    await start_agent()
    server = api.address  # type: ignore[attr-defined]  # api is the apiserver fixture, typed object
    manifest = tmp_path / "fixme.yaml"
    manifest.write_text(FIXME.format(image=image, command='["sh", "-c", "exit 2"]', policy="Never"))
    assert await asyncio.to_thread(ctl, server, "apply", "-f", str(manifest)) == "project/fixme created\n"
    async with controllers(client):
        failed = await wait_phase(client, "fixme", v1.FAILED, timeout=30)
        assert failed.status.observed_generation == 1
        manifest.write_text(FIXME.format(image=image, command='["sleep", "3600"]', policy="Always"))
        assert await asyncio.to_thread(ctl, server, "apply", "-f", str(manifest)) == "project/fixme configured\n"
        running = await wait_phase(client, "fixme", v1.RUNNING, timeout=30)
        assert running.status.observed_generation == 2
        assert [(s.state, s.generation) for s in running.status.services] == [("running", 2)]
        moved = await events(client, "fixme", "SpecChanged")
        assert moved and moved[0].spec.type == "Normal"


async def test_caractrl_restart_recreates_only_the_named_service(
    client: Client, start_agent: StartAgent, image: str, api: object
) -> None:
    agent = await start_agent()
    p = empty("pair")
    service(p, "web", image, ["sleep", "3600"])
    service(p, "db", image, ["sleep", "3600"])
    await client.projects.create(p)
    await bind(client, "pair", agent.node)
    await wait_phase(client, "pair", v1.RUNNING, timeout=30)
    before = container_ids(f"{NODE_LABEL}={agent.node}")
    out = await asyncio.to_thread(ctl, api.address, "restart", "project", "pair", "web")  # type: ignore[attr-defined]  # api is the apiserver fixture, typed object
    assert out == "project/pair restarted (web; generation 2)\n"

    async def recreated() -> dict[str, str] | None:
        current = await client.projects.get("pair")
        ids = container_ids(f"{NODE_LABEL}={agent.node}")
        web_new = [cid for name, cid in ids.items() if "_web_" in name and cid not in before.values()]
        ok = current.status.observed_generation == 2 and current.status.phase == v1.RUNNING and web_new
        return ids if ok else None

    after = await wait_for(recreated, timeout=30, message="web recreated")
    db_before = next(cid for name, cid in before.items() if "_db_" in name)
    assert db_before in after.values()  # db untouched


async def test_drain_moves_the_project_to_the_other_agent_on_the_same_docker_engine(
    client: Client, start_agent: StartAgent, image: str, api: object
) -> None:
    first = await start_agent(labels={"pool": "drain-test"})
    p = empty("moving")
    service(p, "web", image, ["sleep", "3600"])
    p.spec.node_selector["pool"] = "drain-test"
    await client.projects.create(p)
    server = api.address  # type: ignore[attr-defined]  # api is the apiserver fixture, typed object
    async with controllers(client):
        running = await wait_phase(client, "moving", v1.RUNNING, timeout=30)
        assert running.status.node_ref == first.node
        out = await asyncio.to_thread(ctl, server, "drain", first.node, "--no-wait", "--timeout", "60s")
        assert out.splitlines() == [
            f"node/{first.node} cordoned",
            f"project/moving moving off node/{first.node}",
            f"node/{first.node} drained",
        ]
        pending = await client.projects.get("moving")
        assert (pending.status.phase, pending.status.previous_node_ref) == (v1.PENDING, first.node)
        await asyncio.sleep(3.0)  # no other node yet: the old container keeps running on the drained node
        old = container_ids(f"{NODE_LABEL}={first.node}")
        assert len(old) == 1
        assert docker("inspect", "-f", "{{.State.Running}}", *old.values()) == "true"

        second = await start_agent(labels={"pool": "drain-test"})
        moved = await wait_phase(client, "moving", v1.RUNNING, timeout=30)
        assert (moved.status.node_ref, moved.status.previous_node_ref) == (second.node, "")
        assert len(container_ids(f"{NODE_LABEL}={second.node}")) == 1

        async def gone_from_first() -> bool:
            return not container_ids(f"{NODE_LABEL}={first.node}")

        await wait_for(gone_from_first, timeout=20, message="the old container removed from the drained node")
        assert (await client.nodes.get(first.node)).spec.unschedulable
