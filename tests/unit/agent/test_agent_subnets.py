"""The agent's own address space for project networks (`subnets.py`): the free-subnet search (no overlap with routes
or networks, wrap-around, exhaustion, reuse, bigger subnets for big projects), the routing table read, and the
allocator over an in-memory engine that refuses overlapping pools as Docker does (two agents at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from ipaddress import IPv4Network
from typing import Any, cast

import pytest

from caravanserai.agent.docker.calls import DockerRefused
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.docker.records import NetworkSummary
from caravanserai.agent.workload.subnets import (
    AddressSpace,
    AddressSpaceExhausted,
    SubnetAllocator,
    first_free,
    host_routes,
)

RANGE = IPv4Network("10.188.0.0/24")  # sixteen /28s


def net(text: str) -> IPv4Network:
    return IPv4Network(text)


def test_the_first_free_subnet_overlaps_nothing_taken() -> None:
    taken = [net("10.188.0.0/28"), net("10.188.0.20/30"), net("10.188.0.64/26")]
    assert first_free(RANGE, 28, taken) == net("10.188.0.32/28")  # .16/28 holds .20/30
    chosen: list[IPv4Network] = []
    while (found := first_free(RANGE, 28, [*taken, *chosen])) is not None:
        assert not any(found.overlaps(t) for t in [*taken, *chosen])
        chosen.append(found)
    assert len(chosen) == 16 - 1 - 1 - 4  # the /28s holding .0/28, .20/30 and .64/26 are left out


def test_a_route_or_network_wider_than_the_range_leaves_nothing() -> None:
    assert first_free(RANGE, 28, [net("10.0.0.0/8")]) is None


def test_exhaustion_and_reuse() -> None:
    every = [net(f"10.188.0.{16 * i}/28") for i in range(16)]
    assert first_free(RANGE, 28, every) is None
    freed = every[:5] + every[6:]  # the sixth network was removed: its subnet is found again
    assert first_free(RANGE, 28, freed) == every[5]


def test_the_search_starts_where_asked_and_wraps_around() -> None:
    assert first_free(RANGE, 28, [], start=3) == net("10.188.0.48/28")
    assert first_free(RANGE, 28, [], start=16 + 3) == net("10.188.0.48/28")  # modulo the number of subnets
    taken = [net(f"10.188.0.{16 * i}/28") for i in range(3, 16)]
    assert first_free(RANGE, 28, taken, start=3) == net("10.188.0.0/28")


def test_a_bigger_subnet_is_aligned_and_free() -> None:
    found = first_free(RANGE, 26, [net("10.188.0.16/28")])
    assert found == net("10.188.0.64/26")


def test_a_wide_range_is_searched_without_walking_it() -> None:
    wide = net("10.0.0.0/8")
    taken = [net("10.0.0.0/9")]
    assert first_free(wide, 28, taken) == net("10.128.0.0/28")


def test_the_space_gives_big_projects_a_bigger_prefix() -> None:
    space = AddressSpace(RANGE, 28)
    assert space.containers_per_subnet == 13
    assert space.prefix_for(0) == space.prefix_for(13) == 28
    assert space.prefix_for(14) == 27
    assert space.prefix_for(200) == 24
    assert space.prefix_for(254) is None


def test_a_bad_range_or_prefix_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="not an IPv4 network"):
        AddressSpace.parse("10.188.0.1/16")
    with pytest.raises(ValueError, match="must be IPv4"):
        AddressSpace.parse("fd00::/64")
    with pytest.raises(ValueError, match="between the range's /24 and /29"):
        AddressSpace.parse("10.188.0.0/24", 30)
    with pytest.raises(ValueError, match="between the range's /24 and /29"):
        AddressSpace.parse("10.188.0.0/24", 16)


def test_host_routes_are_read_without_the_default_route(tmp_path: Any) -> None:
    table = tmp_path / "route"
    table.write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "br0\t004DD50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "*\t0010A8C0\t00000000\t0201\t0\t0\t4000\t00F0FFFF\t0\t0\t0\n"
    )
    assert host_routes(str(table)) == [net("10.213.77.0/24"), net("192.168.16.0/20")]
    assert host_routes(str(tmp_path / "missing")) == []


class Engine:
    """Docker's network calls in memory, refusing a pool that overlaps another network's as Docker does; each
    creation yields once before it checks, as two agents' requests interleave in dockerd."""

    def __init__(self) -> None:
        self.networks: dict[str, list[str]] = {}

    async def network_present(self, name: str) -> bool:
        return name in self.networks

    async def list_networks(self, label_filter: list[str]) -> list[NetworkSummary]:
        assert label_filter == []
        return [NetworkSummary(name=n, subnets=tuple(s)) for n, s in self.networks.items()]

    async def ensure_network(self, config: Mapping[str, Any]) -> None:
        await asyncio.sleep(0)
        subnets = [c["Subnet"] for c in config["IPAM"]["Config"]]
        for existing in self.networks.values():
            if any(net(a).overlaps(net(b)) for a in subnets for b in existing):
                raise DockerRefused(403, "create network: Pool overlaps with other one on this address space")
        self.networks[config["Name"]] = subnets


def allocator(engine: Engine, node: str, routes: list[IPv4Network] | None = None) -> SubnetAllocator:
    return SubnetAllocator(cast(DockerRuntime, engine), AddressSpace(RANGE, 28), node=node, routes=lambda: routes or [])


async def test_networks_get_subnets_of_the_range_never_a_route() -> None:
    engine = Engine()
    routes = [net("10.188.0.0/26")]  # the range's first four /28s are routed on the host already
    made = allocator(engine, "node-a", routes)
    await asyncio.gather(*(made.ensure({"Name": f"n{i}"}) for i in range(6)))
    subnets = [net(s[0]) for s in engine.networks.values()]
    assert len(set(subnets)) == 6
    assert all(s.subnet_of(RANGE) and s.prefixlen == 28 and not s.overlaps(routes[0]) for s in subnets)
    await made.ensure({"Name": "n0"})  # present: left alone
    assert len(engine.networks) == 6


async def test_two_agents_on_one_engine_never_collide() -> None:
    engine = Engine()
    a, b = allocator(engine, "node-a"), allocator(engine, "node-b")
    b._start = a._start  # both search from the same place: every creation races the other agent's
    await asyncio.gather(*(x.ensure({"Name": f"{x is a}-{i}"}) for i in range(6) for x in (a, b)))
    subnets = [net(s[0]) for s in engine.networks.values()]
    assert len(subnets) == 12
    assert all(not x.overlaps(y) for i, x in enumerate(subnets) for y in subnets[i + 1 :])


async def test_exhaustion_names_the_range_and_a_removed_network_frees_its_subnet() -> None:
    engine = Engine()
    made = allocator(engine, "node-a")
    for i in range(16):
        await made.ensure({"Name": f"n{i}"})
    with pytest.raises(AddressSpaceExhausted, match=r"no free /28 left in network range 10\.188\.0\.0/24"):
        await made.ensure({"Name": "one-too-many"})
    freed = engine.networks.pop("n7")
    await made.ensure({"Name": "again"})
    assert engine.networks["again"] == freed


async def test_a_big_project_gets_a_bigger_subnet() -> None:
    engine = Engine()
    await allocator(engine, "node-a").ensure({"Name": "big"}, containers=40)
    assert net(engine.networks["big"][0]).prefixlen == 26
