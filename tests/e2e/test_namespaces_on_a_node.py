"""Two projects of one name in two namespaces (and one in `default`) on one node at once, on real Docker: their own
containers, networks and volumes, each reading its own namespace's Secret, each served by its own ingress host
and logs, and deleting one leaves the others running."""

from __future__ import annotations

import aiohttp
import grpc
import pytest
from agent_harness import NODE_LABEL, RunningAgent, StartAgent, bind, container_ids, docker, wait_gone, wait_phase

from caravanserai import meta, v1
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.client import Client
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

TEAMS = ("team-a", "team-b")
SERVE = 'echo "hello $GREETING" > /tmp/index.html && echo "started $GREETING" && exec httpd -f -p 8080 -h /tmp'


def web(namespace: str, image: str) -> v1.Project:
    """Project `web` of `namespace`: httpd serving the GREETING of its namespace's Secret `greeting`."""
    p = project("web", image=image, services=["web"], command=["sh", "-c", SERVE])
    p.metadata.namespace = namespace
    p.spec.services[0].env.add(name="GREETING", value_from=v1.KeyRef(secret="greeting", key="text"))
    p.spec.services[0].volume_mounts.add(name="scratch", mount_path="/scratch")
    p.spec.volumes.add(name="scratch", type=v1.VOLUME_EPHEMERAL)
    ingress = p.spec.ingress.add(name="site", host="web")
    ingress.target.service, ingress.target.port = "web", 8080
    return p


async def get(agent: RunningAgent, host: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{agent.agent.ingress_port}/index.html"
    async with aiohttp.ClientSession() as session, session.get(url, headers={"Host": host}) as response:
        return response.status, await response.text()


async def first_log_line(agent: RunningAgent, namespace: str) -> bytes:
    request = api_pb2.LogsRequest(project="web", namespace=namespace, tail=-1)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{agent.agent.port}") as channel:
        lines = [line async for line in api_pb2_grpc.AgentStub(channel).Logs(request, timeout=15)]
    return lines[0].data if lines else b""


async def test_one_name_in_two_namespaces_on_one_node(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    node = agent.node
    for namespace in TEAMS:
        await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=namespace)))
    for namespace in ("default", *TEAMS):
        greeting = v1.Secret(metadata=v1.ObjectMeta(name="greeting", namespace=namespace))
        greeting.spec.data["text"] = namespace.encode()
        await client.secrets.create(meta.with_type_meta(greeting))
        await client.projects.create(web(namespace, image))
        await bind(client, meta.join_key(namespace, "web"), node)
    for namespace in ("default", *TEAMS):
        await wait_phase(client, meta.join_key(namespace, "web"), v1.RUNNING)

    ids = container_ids(f"{NODE_LABEL}={node}")
    names = {f"cara_web_web_{node}", f"cara_team-a_web_web_{node}", f"cara_team-b_web_web_{node}"}
    assert set(ids) == names
    volumes = docker("volume", "ls", "--filter", f"label={NODE_LABEL}={node}", "--format", "{{.Name}}").split()
    assert {f"cara_web_scratch_{node}", f"cara_team-a_web_scratch_{node}", f"cara_team-b_web_scratch_{node}"} <= set(
        volumes
    )
    label = '{{index .Config.Labels "caravanserai.io/namespace"}}'
    assert docker("inspect", "--format", label, f"cara_team-a_web_web_{node}") == "team-a"

    hosts = {"default": "web.web.local", "team-a": "web.web.team-a.local", "team-b": "web.web.team-b.local"}

    async def all_served() -> bool:
        return all([await get(agent, hosts[ns]) == (200, f"hello {ns}\n") for ns in hosts])

    await wait_for(all_served, timeout=10, message="each project served by its own host with its own Secret")
    for namespace in ("default", *TEAMS):
        assert await first_log_line(agent, namespace) == f"started {namespace}".encode()

    # Deleting team-a's `web` leaves the others (and their containers) running.
    await client.projects.delete("team-a/web")
    await wait_phase(client, "team-a/web", v1.TERMINATED, timeout=20)
    await client.projects.delete("team-a/web")  # the record goes (as the garbage collector would remove it)
    await wait_gone(client, "team-a/web")
    left = container_ids(f"{NODE_LABEL}={node}")
    assert left == {n: ids[n] for n in names - {f"cara_team-a_web_web_{node}"}}
    for namespace in ("default", "team-b"):
        assert (await client.projects.get(meta.join_key(namespace, "web"))).status.phase == v1.RUNNING

    async def team_a_gone() -> bool:
        return (await get(agent, hosts["team-a"]))[0] == 404

    await wait_for(team_a_gone, timeout=5, message="team-a's host to be unknown")
    assert await get(agent, hosts["team-b"]) == (200, "hello team-b\n")
    assert await get(agent, hosts["default"]) == (200, "hello default\n")
    volumes = docker("volume", "ls", "--filter", f"label={NODE_LABEL}={node}", "--format", "{{.Name}}").split()
    assert f"cara_team-a_web_scratch_{node}" not in volumes and f"cara_team-b_web_scratch_{node}" in volumes
