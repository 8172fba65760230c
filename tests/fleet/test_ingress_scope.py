"""Ingress scope over real addresses: an Internal host is served to the cluster's nodes and refused (403) to a
client that is not a node; a Public host is served to anyone. The request goes to a host that does not run the
project, so every answer also crosses the one forwarding hop."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from fleet_helpers import wait_running

from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for
from support import http
from support.fleet import Fleet

WEB = ["sh", "-c", "echo scoped > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"]
INGRESS_PORT = 8081  # the agents' default --ingress-listen, inside each host's namespace


def fetch(address: str, host: str) -> tuple[int, str]:
    """(status, X-Caravanserai-Error) of GET / with `Host: host` at address:8081, from the root namespace."""
    reply = http.get(f"http://{address}:{INGRESS_PORT}/index.html", headers={"Host": host})
    return reply.status, "" if reply.status == 200 else reply.headers.get("X-Caravanserai-Error", "")


def fetch_from_host(netns: str, address: str, host: str) -> str:
    """The body of GET / with `Host: host` at address:8081, requested from inside network namespace `netns`."""
    code = (
        "import sys, urllib.request\n"
        f"r = urllib.request.Request('http://{address}:{INGRESS_PORT}/index.html', headers={{'Host': '{host}'}})\n"
        "sys.stdout.write(urllib.request.urlopen(r, timeout=5).read().decode())\n"
    )
    argv = ["nsenter", f"--net=/run/netns/{netns}", "--", sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


async def test_internal_hosts_only_for_nodes_public_for_anyone(fleet: Fleet) -> None:
    project = builders.project("scoped", image=fleet.config.image, command=WEB, requests={"cpu": "100m"})
    service = project.spec.services[0].name
    for name, scope in (("inner", "Internal"), ("outer", "Public")):
        route = project.spec.ingress.add(name=name, host=name)
        route.target.service, route.target.port, route.access.scope = service, 8080, scope
    async with fleet.client() as client:
        await client.projects.create(project)
        node = (await wait_running(client, ["scoped"]))["scoped"]
    elsewhere = next(h for h in fleet.workers if h.name != node)

    async def public_served() -> bool:
        return await asyncio.to_thread(fetch, elsewhere.address, "outer.scoped.local") == (200, "")

    await wait_for(public_served, 30, interval=0.5, message="the Public host to be served through another node")
    # The root namespace reaches the hosts over the bridge from an address that is no node's: not inside.
    assert await asyncio.to_thread(fetch, elsewhere.address, "inner.scoped.local") == (403, "internal-only")
    # From a node's own address the Internal host is served (and forwarded to the node that runs it).
    body = await asyncio.to_thread(fetch_from_host, elsewhere.netns, elsewhere.address, "inner.scoped.local")
    assert body == "scoped\n"
