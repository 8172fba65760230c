"""The agents' ingress against real containers: by host name, from any node, following moves and deletions."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from agent_harness import RunningAgent, StartAgent, bind, docker, wait_gone, wait_phase

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

# The page names the container that served it (a random id drawn when it starts).
SERVE = 'echo "hello from $(cat /proc/sys/kernel/random/uuid)" > /tmp/index.html && exec httpd -f -p 8080 -h /tmp'


def web_project(name: str, image: str, *, port: int = 8080) -> v1.Project:
    p = project(name, image=image, services=["web"], command=["sh", "-c", SERVE])
    ingress = p.spec.ingress.add(name="site", host="web")
    ingress.target.service, ingress.target.port = "web", port
    return p


async def get(agent: RunningAgent, host: str, path: str = "/index.html") -> tuple[int, str, str]:
    """(status, body, X-Caravanserai-Error) of a GET through `agent`'s ingress."""
    url = f"http://127.0.0.1:{agent.agent.ingress_port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url, headers={"Host": host}) as response:
        return response.status, await response.text(), response.headers.get("X-Caravanserai-Error", "")


async def served_by(client: Client, name: str) -> str:
    """The page project `name`'s container serves, read inside the container."""
    p = await client.projects.get(name)
    return await asyncio.to_thread(docker, "exec", p.status.services[0].container_id, "cat", "/tmp/index.html") + "\n"


async def test_ingress_serves_from_any_node(client: Client, start_agent: StartAgent, image: str) -> None:
    one, two = await start_agent(), await start_agent()
    assert one.agent.ingress_port and two.agent.ingress_port and one.agent.ingress_port != two.agent.ingress_port
    assert (await client.nodes.get(one.node)).status.network.ingress_port == one.agent.ingress_port
    await client.projects.create(web_project("hello", image))
    await bind(client, "hello", one.node)
    await wait_phase(client, "hello", v1.RUNNING)
    page = await served_by(client, "hello")

    async def answered_by_both() -> bool:
        return [await get(a, "web.hello.local") for a in (one, two)] == [(200, page, "")] * 2

    await wait_for(answered_by_both, timeout=1, message="both ingresses to serve the new project")  # no polling delay

    # Moved to the other node: served by the new container within a second of Running, through both nodes.
    moving = meta.copy(await client.projects.get("hello"))
    meta.set_phase(moving, v1.PENDING, reason="NodeLost", message="moved by the test", now=0.0)
    moving.status.node_ref = ""
    await client.projects.update_status(moving)
    await bind(client, "hello", two.node)
    await wait_phase(client, "hello", v1.RUNNING)
    new_page = await served_by(client, "hello")
    assert new_page != page

    async def moved() -> bool:
        return [await get(a, "web.hello.local") for a in (one, two)] == [(200, new_page, "")] * 2

    await wait_for(moved, timeout=1, message="both ingresses to serve the project from its new node")

    await client.projects.delete("hello")  # Terminating, then Terminated: known, not served
    await wait_phase(client, "hello", v1.TERMINATED, timeout=20)

    async def stopped() -> bool:
        return [(await get(a, "web.hello.local"))[:3:2] for a in (one, two)] == [(503, "not-running")] * 2

    await wait_for(stopped, timeout=1, message="the terminated project's host to answer 503")
    await client.projects.delete("hello")  # the record goes (as the garbage collector would remove it)
    await wait_gone(client, "hello")

    async def forgotten() -> bool:
        return [(await get(a, "web.hello.local"))[0] for a in (one, two)] == [404, 404]

    await wait_for(forgotten, timeout=1, message="the deleted project's host to be unknown")


async def test_ingress_error_pages(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    status, body, error = await get(agent, "nowhere.example.com")
    assert (status, error) == (404, "unknown-host") and "nowhere.example.com" in body

    await client.projects.create(web_project("later", image))  # Pending: known, not Running

    async def known() -> bool:
        return (await get(agent, "web.later.local"))[0] != 404

    await wait_for(known, timeout=1, message="the new project's host to be known")
    status, body, error = await get(agent, "web.later.local")
    assert (status, error) == (503, "not-running") and 'Project "later" is Pending' in body

    await client.projects.create(web_project("closed", image, port=9999))  # nothing listens on 9999
    await bind(client, "closed", agent.node)
    await wait_phase(client, "closed", v1.RUNNING)

    async def followed() -> bool:  # the agent's route table follows the phase through its informer
        return (await get(agent, "web.closed.local"))[2] != "not-running"

    await wait_for(followed, timeout=5, message="the route to follow the project to Running")
    status, body, error = await get(agent, "web.closed.local")
    assert (status, error) == (502, "backend-refused") and 'Project "closed"' in body


async def test_keep_alive_to_a_container(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    await client.projects.create(web_project("kept", image))
    await bind(client, "kept", agent.node)
    await wait_phase(client, "kept", v1.RUNNING)
    page = await served_by(client, "kept")
    url = f"http://127.0.0.1:{agent.agent.ingress_port}/index.html"
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(5):  # one client connection, kept alive across requests
            async with session.get(url, headers={"Host": "web.kept.local"}) as response:
                assert (response.status, await response.text()) == (200, page)
        results = await asyncio.gather(*(session.get(url, headers={"Host": "web.kept.local"}) for _ in range(3)))
        for response in results:
            assert response.status == 200
            response.release()


async def test_a_container_that_does_not_answer_fails_fast(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    await client.projects.create(web_project("paused", image))
    await bind(client, "paused", agent.node)
    running = await wait_phase(client, "paused", v1.RUNNING)
    page = await served_by(client, "paused")

    async def served() -> bool:
        return await get(agent, "web.paused.local") == (200, page, "")

    await wait_for(served, timeout=5, message="the project served (its address now known to the ingress)")
    # As while Docker restarts the container: its address is on no bridge any more, so a connection to it is never
    # answered (the kernel gives up after about 3 s).
    container = running.status.services[0].container_id
    network = docker("inspect", "-f", "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}}{{end}}", container)
    docker("network", "disconnect", network, container)
    started = asyncio.get_running_loop().time()
    status, body, error = await get(agent, "web.paused.local")
    assert asyncio.get_running_loop().time() - started < 1.5
    assert (status, error) == (503, "backend-unreachable")
    assert 'Project "paused" (web:8080) did not accept a connection within 0.5 s' in body
