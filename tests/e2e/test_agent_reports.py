"""What a project's status says about what the agent could not do, against real Docker: a network Docker refuses
to make (Warning Event, the Phase condition and each service's message at once, retried until it succeeds), a
service waiting for a Secret named at the project level, the exit code of a container Docker restarted, and
completed jobs counted as ready."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, wait_phase

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.cli.describe_project import describe_project, service_status_rows
from caravanserai.cli.kinds.project import project_row
from caravanserai.cli.tables import RowContext
from caravanserai.client import Client
from caravanserai.controller import Result
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

SLEEP = ["sleep", "3600"]


def empty(name: str) -> v1.Project:
    return meta.with_type_meta(v1.Project(metadata=v1.ObjectMeta(name=name)))


def service(p: v1.Project, name: str, image: str, command: list[str] = SLEEP, policy: str = "") -> v1.Service:
    svc = p.spec.services.add(name=name, image=image, restart_policy=policy)
    svc.command.extend(command)
    return svc


def phase_condition(p: v1.Project) -> tuple[str, str]:
    cond = meta.get_condition(p.status.conditions, v1.CONDITION_PHASE)
    assert cond is not None
    return cond.reason, cond.message


async def events(client: Client, name: str, reason: str) -> list[v1.Event]:
    found = (await client.events.list()).items
    return [e for e in found if e.spec.involved_object.name == name and e.spec.reason == reason]


@pytest.fixture
async def engine(image: str) -> AsyncIterator[DockerRuntime]:
    async with DockerRuntime.connect() as docker:
        yield docker


async def test_a_network_docker_refuses_is_reported_at_once_and_retried(
    client: Client, start_agent: StartAgent, image: str, engine: DockerRuntime
) -> None:
    agent = await start_agent(network_pool=0)  # the project's network is cara_<project>_<node>
    name = "blocked"
    network = naming.network_name(name, agent.node)
    # Two networks under the project network's name (Docker lets the API make them): Docker refuses to tell which
    # one is meant, so the agent can neither use nor make it.
    labels = {NODE_LABEL: agent.node, "caravanserai.io/test": "duplicate"}
    config = {"Name": network, "CheckDuplicate": False, "Labels": labels}
    duplicates = [(await engine.api.networks.create(config)).id for _ in range(2)]
    try:
        p = empty(name)
        service(p, "web", image)
        service(p, "db", image)
        await client.projects.create(p)
        await bind(client, name, agent.node)
        bound_at = time.monotonic()

        async def reported() -> v1.Project | None:
            current = await client.projects.get(name)
            reason, _ = phase_condition(current)
            return current if reason == "NetworkFailed" else None

        stuck = await wait_for(reported, timeout=10, message="the network failure in the project's status")
        assert time.monotonic() - bound_at < 5  # at once, not after retries
        assert stuck.status.phase == v1.SCHEDULED
        message = phase_condition(stuck)[1]
        # The agent looks the network up before it makes one: Docker refuses at the lookup.
        assert message.startswith(f"waiting for network: inspect network {network}: ")
        assert "ambiguous" in message and message.endswith("(services db, web)")  # Docker's own words
        for status in stuck.status.services:
            assert status.state == "waiting" and status.message.startswith("waiting for network: inspect network")
        warnings = await wait_for(lambda: events(client, name, "NetworkFailed"), timeout=10)
        assert warnings[0].spec.type == "Warning" and "ambiguous" in warnings[0].spec.message
        # What caractrl shows: the reason in `get -o wide` and at the top of `describe`.
        row = project_row(stuck, RowContext(), True)
        assert row[1] == v1.SCHEDULED and row[-2] == "NetworkFailed" and row[-1] == message
        header = describe_project(stuck, warnings, time.time()).split("Node:", 1)[0]
        assert "NetworkFailed" in header and message in header

        # Still refused some time later (retried, never Failed) ...
        await asyncio.sleep(2)
        assert (await client.projects.get(name)).status.phase == v1.SCHEDULED
    finally:
        for network_id in duplicates:  # by id: the name is ambiguous
            await (await engine.api.networks.get(network_id)).delete()
    # ... and the obstacle gone, the next attempt makes the network and the project runs; the message clears.
    running = await wait_phase(client, name, v1.RUNNING, timeout=40)
    assert phase_condition(running)[0] == "ContainersRunning"
    assert all(s.state == "running" and not s.message for s in running.status.services)


async def test_a_service_waiting_for_a_secret_is_named_at_the_project_level(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    p = empty("app")
    svc = service(p, "app", image)
    svc.env.add(name="PASSWORD", value_from=v1.KeyRef(secret="db-creds", key="password"))
    await client.projects.create(p)
    await bind(client, "app", agent.node)

    async def explained() -> v1.Project | None:
        current = await client.projects.get("app")
        return current if phase_condition(current)[0] == "Waiting" else None

    waiting = await wait_for(explained, timeout=20, message="the project to say what it waits for")
    assert waiting.status.phase == v1.SCHEDULED
    assert phase_condition(waiting)[1] == 'waiting for secret "db-creds" (not found) (service app)'
    assert project_row(waiting, RowContext(), True)[-1] == 'waiting for secret "db-creds" (not found) (service app)'
    assert 'waiting for secret "db-creds"' in describe_project(waiting, [], time.time()).split("Node:", 1)[0]

    secret = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name="db-creds")))
    secret.spec.data["password"] = b"s3cret"
    await client.secrets.create(secret)
    running = await wait_phase(client, "app", v1.RUNNING, timeout=30)
    assert phase_condition(running)[0] == "ContainersRunning"


async def test_the_last_exit_code_survives_a_restart_by_docker(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    # As on a busy machine: the agent looks at a project only after Docker has restarted the crashed container
    # (Docker's inspect then says exit code 0 again).
    assert agent.agent.controller is not None
    reconciler = agent.agent.controller.reconciler
    reconcile: Callable[[str], Awaitable[Result]] = reconciler.reconcile

    async def slowly(key: str) -> Result:
        await asyncio.sleep(0.5)
        return await reconcile(key)

    reconciler.reconcile = slowly  # type: ignore[method-assign]  # a slow agent, by wrapping the method
    p = empty("crashy")
    service(p, "app", image, ["sh", "-c", "test -f /crashed || { touch /crashed; sleep 1; exit 3; }; exec sleep 3600"])
    await client.projects.create(p)
    await bind(client, "crashy", agent.node)

    async def restarted() -> v1.ServiceStatus | None:
        current = await client.projects.get("crashy")
        status = current.status.services[0] if current.status.services else None
        return status if status is not None and status.restart_count >= 1 and status.state == "running" else None

    status = await wait_for(restarted, timeout=30, message="the service restarted once by Docker")
    assert status.last_exit_code == 3
    (row,) = service_status_rows([status])  # caractrl describe's service table
    assert row[4:7] == ["1", "0", "3"]  # RESTARTS, EXIT CODE (running again), LAST EXIT


async def test_a_completed_job_counts_as_ready(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    p = empty("site")
    service(p, "web", image)
    service(p, "worker", image)
    service(p, "migrate", image, ["sh", "-c", "echo migrated"], policy="Never")
    await client.projects.create(p)
    await bind(client, "site", agent.node)

    async def settled() -> v1.Project | None:
        current = await client.projects.get("site")
        states = {s.name: s.state for s in current.status.services}
        return current if current.status.phase == v1.RUNNING and states.get("migrate") == "completed" else None

    done = await wait_for(settled, timeout=30, message="the project Running with its job completed")
    assert project_row(done, RowContext(), False)[3] == "3/3"
    assert "3/3 services" in describe_project(done, [], time.time())
