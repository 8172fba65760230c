"""Projects spread over the fleet's hosts; their logs are read across hosts; nothing routes off the machine."""

from __future__ import annotations

import subprocess

from fleet_helpers import QUICK_STOP, copies, wait_running

from caravanserai.testing import builders
from caravanserai.testing.fleet import Fleet
from caravanserai.testing.wait import wait_for


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
                builders.project(name, image=fleet.config.image, command=QUICK_STOP, requests={"cpu": "800m"})  # one per host fits
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
