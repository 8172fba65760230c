"""The agent against real Docker: registration, heartbeat, running projects, failures, teardown and logs."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, container_ids, docker, docker_list, wait_gone, wait_phase

from caravanserai import meta, v1
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import seconds
from caravanserai.errors import NotFound
from caravanserai.testing import free_port
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for
from support import http

pytestmark = pytest.mark.docker

WEB = ["sh", "-c", "echo hello-from-web > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]


async def log_lines(
    port: int, request: api_pb2.LogsRequest, *, limit: int, timeout: float = 15.0
) -> list[api_pb2.LogLine]:
    """Up to `limit` lines of a Logs stream from the agent on `port`."""
    lines: list[api_pb2.LogLine] = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = api_pb2_grpc.AgentStub(channel).Logs(request, timeout=timeout)
        async for line in call:
            lines.append(line)
            if len(lines) >= limit:
                call.cancel()
                break
    return lines


async def test_registration_and_heartbeat(client: Client, start_agent: StartAgent) -> None:
    agent = await start_agent(labels={"zone": "test"})
    node = await client.nodes.get(agent.node)
    assert node.metadata.labels["zone"] == "test"
    assert node.status.state == v1.NODE_READY
    ready = meta.get_condition(node.status.conditions, v1.CONDITION_READY)
    assert ready is not None and (ready.status, ready.reason) == (v1.TRUE, "AgentReady")
    assert {"cpu", "memory", "disk"} <= node.status.capacity.keys()
    assert node.status.allocatable["cpu"] != node.status.capacity["cpu"]  # 500m reserved
    assert node.status.node_info.docker_version and node.status.node_info.kernel_version
    assert node.status.network.agent_port == agent.agent.port
    assert [a.type for a in node.status.network.addresses] == ["InternalIP", "Hostname"]

    async def lease() -> v1.Lease | None:
        try:
            return await client.leases.get(agent.node)
        except NotFound:
            return None  # the heartbeat task creates the Lease alongside registration, not before it

    first = await wait_for(lease, timeout=10)
    assert (first.spec.holder_identity, first.spec.lease_duration_seconds) == (agent.node, 40)

    async def renewed() -> bool:
        lease = await client.leases.get(agent.node)
        return seconds(lease.spec.renew_time) > seconds(first.spec.renew_time)

    await wait_for(renewed, timeout=10)

    async def measured() -> v1.Node | None:
        current = await client.nodes.get(agent.node)
        return current if current.status.network.throughput.download else None

    throughput = (await wait_for(measured, timeout=15)).status.network.throughput
    assert throughput.upload and throughput.HasField("measured_at")

    await client.nodes.delete(agent.node, force=True)

    async def registered_again() -> bool:
        again = await client.nodes.get(agent.node)
        return again.status.state == v1.NODE_READY

    await wait_for(registered_again, timeout=15, message="the deleted node to be registered again")


async def test_two_services_reach_each_other_by_name(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    host_port = free_port()
    p = project("shop", image=image, services=["web", "client"])
    web, fetcher = p.spec.services
    web.command[:] = WEB
    web.ports.add(container_port=8080, host_port=host_port, host_ip="127.0.0.1")
    fetch = "until wget -q -O- http://web:8080/index.html 2>/dev/null; do sleep 0.2; done; exec sleep 3600"
    fetcher.command[:] = ["sh", "-c", fetch]
    await client.projects.create(p)
    await bind(client, "shop", agent.node)

    running = await wait_phase(client, "shop", v1.RUNNING)
    phase = meta.get_condition(running.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "ContainersRunning"
    assert running.status.observed_generation == 1
    statuses = {s.name: s for s in running.status.services}
    assert set(statuses) == {"web", "client"}
    assert all(s.ready and s.state == "running" and s.container_id for s in statuses.values())
    ids = container_ids(f"{NODE_LABEL}={agent.node}")
    assert ids == {
        f"cara_shop_web_{agent.node}": statuses["web"].container_id,
        f"cara_shop_client_{agent.node}": statuses["client"].container_id,
    }

    # Running means the containers run; httpd may need a moment more before it answers.
    url = f"http://127.0.0.1:{host_port}/index.html"
    body = await wait_for(
        lambda: asyncio.to_thread(http.get_ok, url), timeout=10, message="the published port to answer"
    )
    assert body == b"hello-from-web\n"

    request = api_pb2.LogsRequest(project="shop", service="client", follow=True, tail=-1)
    lines = await log_lines(agent.agent.port, request, limit=1)
    assert (lines[0].service, lines[0].stream, lines[0].data) == ("client", "stdout", b"hello-from-web")


async def test_crash_with_restart_never_fails_with_the_exit_code(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    p = project("crash", image=image, services=["job", "steady"])
    job = p.spec.services[0]
    job.command[:] = ["sh", "-c", "sleep 1; exit 3"]
    job.restart_policy = "Never"
    await client.projects.create(p)
    await bind(client, "crash", agent.node)

    await wait_phase(client, "crash", v1.RUNNING)  # the job runs for a second first
    failed = await wait_phase(client, "crash", v1.FAILED, timeout=20)  # the Docker event reports its death
    phase = meta.get_condition(failed.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "ContainerExited"
    assert phase.message == "service job exited with code 3 (restart policy Never)"
    job_status = next(s for s in failed.status.services if s.name == "job")
    assert (job_status.exit_code, job_status.state, job_status.ready) == (3, "exited", False)

    async def others_stopped() -> bool:  # a Failed project runs nothing
        return docker("inspect", "-f", "{{.State.Running}}", f"cara_crash_steady_{agent.node}") == "false"

    await wait_for(others_stopped, timeout=15)


async def test_missing_image_fails_with_image_pull_failed(client: Client, start_agent: StartAgent) -> None:
    agent = await start_agent()
    await client.projects.create(project("ghost", image="caravanserai/does-not-exist:1"))
    await bind(client, "ghost", agent.node)
    failed = await wait_phase(client, "ghost", v1.FAILED, timeout=25)
    phase = meta.get_condition(failed.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "ImagePullFailed"
    assert phase.message.startswith("service svc0: ") and len(phase.message) > len("service svc0: ")
    assert docker_list("container", f"{NODE_LABEL}={agent.node}") == []


async def test_delete_removes_containers_network_and_ephemeral_volumes(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    p = project("gone", image=image, services=2)
    p.spec.volumes.add(name="scratch")
    p.spec.volumes.add(name="keep", type="Persistent")
    p.spec.services[0].volume_mounts.add(name="scratch", mount_path="/scratch")
    p.spec.services[1].volume_mounts.add(name="keep", mount_path="/keep")
    await client.projects.create(p)
    await bind(client, "gone", agent.node)
    await wait_phase(client, "gone", v1.RUNNING)
    label = f"{NODE_LABEL}={agent.node}"
    assert docker_list("container", label) == [f"cara_gone_svc0_{agent.node}", f"cara_gone_svc1_{agent.node}"]
    assert docker_list("network", label) == [f"cara_gone_{agent.node}"]
    assert docker_list("volume", label) == [f"cara_gone_keep_{agent.node}", f"cara_gone_scratch_{agent.node}"]

    response = await client.projects.delete("gone")
    assert not response.deleted
    terminated = await wait_phase(client, "gone", v1.TERMINATED, timeout=20)
    phase = meta.get_condition(terminated.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "ResourcesRemoved"
    assert docker_list("container", label) == []
    assert docker_list("network", label) == []
    assert docker_list("volume", label) == [f"cara_gone_keep_{agent.node}"]

    assert (await client.projects.delete("gone")).deleted  # as gc would
    await wait_gone(client, "gone")


async def test_spec_change_recreates_only_changed_services(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    await client.projects.create(project("edit", image=image, services=["a", "b"]))
    await bind(client, "edit", agent.node)
    before = {s.name: s.container_id for s in (await wait_phase(client, "edit", v1.RUNNING)).status.services}

    def version_2(current: v1.Project) -> bool:
        current.spec.services[1].env.add(name="VERSION", value="2")
        return True

    await modify(client.projects, "edit", version_2)  # the agent may write its status meanwhile

    async def recreated() -> v1.Project | None:
        p = await client.projects.get("edit")
        ids = {s.name: s.container_id for s in p.status.services}
        new_b = ids.get("b") not in ("", before["b"])
        ok = p.status.observed_generation == 2 and new_b and p.status.phase == v1.RUNNING
        return p if ok and all(s.ready for s in p.status.services) else None

    after = await wait_for(recreated, timeout=20)
    ids = {s.name: s.container_id for s in after.status.services}
    assert ids["a"] == before["a"]
    edited = f"cara_edit_b_{agent.node}"
    assert docker("inspect", "-f", '{{index .Config.Labels "caravanserai.io/generation"}}', edited) == "2"
    assert "VERSION=2" in docker("inspect", "-f", "{{json .Config.Env}}", edited)


async def test_logs_tail_and_follow(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    p = project("chatty", image=image)
    p.spec.services[0].command[:] = [
        "sh",
        "-c",
        "for i in 1 2 3; do echo out-$i; echo err-$i >&2; done; "
        "i=4; while true; do echo out-$i; i=$((i+1)); sleep 0.2; done",
    ]
    await client.projects.create(p)
    await bind(client, "chatty", agent.node)
    await wait_phase(client, "chatty", v1.RUNNING)
    port = agent.agent.port

    async def has_backlog() -> bool:
        lines = await log_lines(port, api_pb2.LogsRequest(project="chatty", tail=-1), limit=100)
        return len(lines) >= 12  # the stderr lines are long written, wherever Docker filed them

    await wait_for(has_backlog, timeout=10)
    # Within a stream the order is exact; across streams it follows Docker's timestamps (taken when Docker read
    # each pipe), so only the per-stream sequences are compared.
    backlog = await log_lines(port, api_pb2.LogsRequest(project="chatty", tail=-1), limit=1000)
    assert [line.data for line in backlog if line.stream == "stderr"] == [b"err-1", b"err-2", b"err-3"]
    assert [line.data for line in backlog if line.stream == "stdout"][:4] == [b"out-1", b"out-2", b"out-3", b"out-4"]
    assert {line.service for line in backlog} == {"svc0"}

    tail = await log_lines(port, api_pb2.LogsRequest(project="chatty", service="svc0", tail=2), limit=100)
    numbers = [int(line.data.split(b"-")[1]) for line in tail]
    assert [line.stream for line in tail] == ["stdout", "stdout"] and numbers[1] == numbers[0] + 1 and numbers[0] >= 4

    stamped = await log_lines(port, api_pb2.LogsRequest(project="chatty", tail=1, timestamps=True), limit=1)
    assert stamped[0].data[:2] == b"20" and b"Z out-" in stamped[0].data

    followed = await log_lines(port, api_pb2.LogsRequest(project="chatty", tail=1, follow=True), limit=4)
    numbers = [int(line.data.split(b"-")[1]) for line in followed]
    assert numbers == list(range(numbers[0], numbers[0] + 4))  # no gap, no repeat between backlog and follow

    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await log_lines(port, api_pb2.LogsRequest(project="nope"), limit=1)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


async def test_terminating_overrides_a_late_running(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    await client.projects.create(project("quick", image=image, services=3))
    await bind(client, "quick", agent.node)
    await client.projects.delete("quick")  # deleted while the agent is still starting it
    await wait_phase(client, "quick", v1.TERMINATED, timeout=20)
    assert docker_list("container", f"{NODE_LABEL}={agent.node}") == []
    assert (await client.projects.delete("quick")).deleted
    with pytest.raises(NotFound):
        await client.projects.get("quick")
