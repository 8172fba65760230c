"""Projects spread over the fleet's hosts; their logs are read across hosts; nothing routes off the machine."""

from __future__ import annotations

import asyncio
import re
import subprocess

from fleet_helpers import QUICK_STOP, copies, wait_running

from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for
from support import http
from support.fleet import Fleet


def test_no_harness_address_routes_off_the_machine(fleet: Fleet) -> None:
    assert fleet.network.routes_contained() == {}
    for host in fleet.network.hosts.values():
        route = subprocess.run(["ip", "route", "get", host.address], capture_output=True, text=True).stdout
        assert f"dev {fleet.network.bridge}" in route and " via " not in route


def test_a_cut_link_never_falls_back_to_the_default_route(fleet: Fleet) -> None:
    host = fleet.workers[0]
    fleet.cut(host)
    assert fleet.network.routes_contained() == {}
    fleet.heal(host)


async def test_projects_spread_over_three_hosts_and_logs_cross_hosts(fleet: Fleet) -> None:
    names = [f"spread-{i}" for i in range(3)]
    async with fleet.client() as client:
        for name in names:
            await client.projects.create(
                builders.project(
                    name, image=fleet.config.image, command=QUICK_STOP, requests={"cpu": "800m"}
                )  # one per host fits
            )
        placement = await wait_running(client, names)
    assert sorted(placement.values()) == sorted(h.name for h in fleet.workers)
    for name, node in placement.items():
        assert list(await copies(fleet, name)) == [node]
        # caractrl runs in the root namespace and reads the log from the agent of the host that runs it.
        result = await wait_for(
            lambda name=name: (r := fleet.caractrl("logs", name)).returncode == 0 and "started on" in r.stdout and r,
            20,
            interval=0.5,
            message=f"logs of {name}",
        )
        assert "started on" in result.stdout


WEB = ["sh", "-c", "echo hello-from-caravanserai > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"]
INGRESS_PORT = 8081  # the agents' default --ingress-listen, inside each host's namespace


async def test_ingress_and_port_forward_reach_a_project_on_another_host(fleet: Fleet) -> None:
    project = builders.project("site", image=fleet.config.image, command=WEB, requests={"cpu": "100m"})
    route = project.spec.ingress.add(name="web", host="web")
    route.target.service, route.target.port, route.access.scope = project.spec.services[0].name, 8080, "Public"
    async with fleet.client() as client:
        await client.projects.create(project)
        node = (await wait_running(client, ["site"]))["site"]
    elsewhere = next(h for h in fleet.workers if h.name != node)

    def via_ingress() -> bytes:
        return http.get_ok(f"http://{elsewhere.address}:{INGRESS_PORT}/index.html", headers={"Host": "web.site.local"})

    body = await wait_for(lambda: asyncio.to_thread(via_ingress), 30, interval=0.5, message="ingress answers")
    assert body == b"hello-from-caravanserai\n"

    forward = await asyncio.create_subprocess_exec(
        *fleet.caractrl_argv("port-forward", f"site/{project.spec.services[0].name}", ":8080"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert forward.stdout is not None
        line = (await asyncio.wait_for(forward.stdout.readline(), 30)).decode()
        local = re.search(r"Forwarding from (\S+):(\d+)", line)
        assert local, line

        url = f"http://{local.group(1)}:{local.group(2)}/index.html"
        assert await asyncio.to_thread(http.get_ok, url) == b"hello-from-caravanserai\n"
    finally:
        forward.terminate()
        await forward.wait()
