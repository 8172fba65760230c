"""Placement rules against a real apiserver and etcd with simulated nodes: every node affinity operator, project
affinity and anti-affinity over each kind of topology key, spread constraints (maxSkew, DoNotSchedule and
ScheduleAnyway), the reasons a Pending project gets, and the explanation a bound one gets."""

from __future__ import annotations

from collections.abc import Callable

from cluster_sim import add_node, condition, events_for, running_manager

from caravanserai import v1
from caravanserai.cli.describe_project import describe_project
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.scheduler import app
from caravanserai.project.affinity import HOSTNAME_KEY, ZONE_KEY
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


def scheduler(client: Client):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
    return running_manager(client, lambda m: app.setup(m, client, CLOCK))


async def placed_on(client: Client, name: str) -> str:
    async def check() -> str | None:
        p = await client.projects.get(name)
        return p.status.node_ref if p.status.phase == v1.SCHEDULED else None

    return await wait_for(check, 10, message=f"{name} bound")


async def pending_reason(client: Client, name: str) -> str:
    async def check() -> str | None:
        cond = condition(await client.projects.get(name), v1.CONDITION_SCHEDULED)
        return cond.message if cond is not None and cond.reason == "Unschedulable" else None

    return await wait_for(check, 10, message=f"{name} unschedulable")


def requiring(name: str, key: str, operator: str, *values: str) -> v1.Project:
    p = project(name)
    p.spec.affinity.node_affinity.required.add().match_expressions.add(key=key, operator=operator, values=values)
    return p


async def test_every_node_affinity_operator_places_on_the_matching_node(client: Client) -> None:
    await add_node(client, "n-ssd", labels={"disk": "ssd", "gen": "3"})
    await add_node(client, "n-hdd", labels={"disk": "hdd", "gen": "1"})
    await add_node(client, "n-bare")
    cases = {
        "in": (requiring("in", "disk", "In", "ssd"), "n-ssd"),
        "notin": (requiring("notin", "disk", "NotIn", "ssd", "hdd"), "n-bare"),
        "exists": (requiring("exists", "gen", "Exists"), None),  # n-ssd or n-hdd
        "absent": (requiring("absent", "disk", "DoesNotExist"), "n-bare"),
        "gt": (requiring("gt", "gen", "Gt", "2"), "n-ssd"),
        "lt": (requiring("lt", "gen", "Lt", "2"), "n-hdd"),
    }
    preferred = project("prefers-ssd")
    term = preferred.spec.affinity.node_affinity.preferred.add(weight=100)
    term.preference.match_expressions.add(key="disk", operator="In", values=["ssd"])
    async with scheduler(client):
        for obj, _ in cases.values():
            await client.projects.create(obj)
        await client.projects.create(preferred)
        await client.projects.create(requiring("nowhere", "disk", "In", "nvme"))
        for name, (_, expected) in cases.items():
            node = await placed_on(client, name)
            assert (node == expected) if expected else (node in ("n-ssd", "n-hdd")), (name, node)
        assert await placed_on(client, "prefers-ssd") == "n-ssd"
        assert await pending_reason(client, "nowhere") == (
            "0/3 nodes are available: 3 node(s) didn't match node affinity. No node can ever fit this project "
            "(infeasible)."
        )


def away_from(name: str, app_label: str, key: str, labels: dict[str, str] | None = None) -> v1.Project:
    p = project(name, labels=labels)
    term = p.spec.affinity.project_anti_affinity.required.add(topology_key=key)
    term.label_selector.match_labels["app"] = app_label
    return p


async def test_anti_affinity_and_affinity_over_each_topology_key_and_the_decision_explained(client: Client) -> None:
    for name, zone, rack in (("a1", "a", "r1"), ("a2", "a", "r2"), ("b1", "b", "r1")):
        await add_node(client, name, labels={ZONE_KEY: zone, "rack": rack})
    async with scheduler(client):
        await client.projects.create(project("db", labels={"app": "db"}, node_selector={"rack": "r2"}))
        assert await placed_on(client, "db") == "a2"
        await client.projects.create(away_from("by-zone", "db", ZONE_KEY))
        await client.projects.create(away_from("by-host", "db", HOSTNAME_KEY, labels={"app": "web"}))
        await client.projects.create(away_from("by-rack", "db", "rack"))
        near = project("near-db")
        near_term = near.spec.affinity.project_affinity.required.add(topology_key=ZONE_KEY)
        near_term.label_selector.match_expressions.add(key="app", operator="In", values=["db"])
        near.spec.node_selector["rack"] = "r1"
        await client.projects.create(near)
        assert await placed_on(client, "by-zone") == "b1"
        assert await placed_on(client, "by-host") in ("a1", "b1")
        assert await placed_on(client, "by-rack") in ("a1", "b1")
        assert await placed_on(client, "near-db") == "a1"
        # A placed project's required anti-affinity keeps matching projects out of its domain (symmetry).
        await client.projects.create(away_from("loner", "web", ZONE_KEY, labels={"app": "loner"}))
        await client.projects.create(project("web-2", labels={"app": "web"}))
        loner = await placed_on(client, "loner")
        web_2 = await placed_on(client, "web-2")
        zones = {"a1": "a", "a2": "a", "b1": "b"}
        assert zones[loner] != zones[web_2]
        blocked = project("blocked")  # web-2 and loner cover both zones
        blocked_term = blocked.spec.affinity.project_anti_affinity.required.add(topology_key=ZONE_KEY)
        blocked_term.label_selector.match_expressions.add(key="app", operator="In", values=["web", "loner"])
        await client.projects.create(blocked)
        assert await pending_reason(client, "blocked") == (
            "0/3 nodes are available: 3 node(s) didn't match project anti-affinity."
        )
        bound = await client.projects.get("by-zone")
    scores = bound.status.placement_scores
    assert scores.chosen.node == "b1" and scores.feasible == 1 and not scores.HasField("runner_up")
    assert abs(scores.chosen.total - sum(p.score for p in scores.chosen.plugins)) < 1e-6
    assert [p.plugin for p in scores.chosen.plugins] == ["resources", "taints", "start-delay", "rpo"]
    message = (await events_for(client, "by-zone", "Scheduled"))[0].spec.message
    assert (
        message.startswith("Successfully assigned by-zone to b1. Scores: b1 ") and "1 feasible of 3 searched" in message
    )
    assert "Scheduling Decision:" in describe_project(bound, [], CLOCK.now())


def spread(name: str, when: str, key: str = HOSTNAME_KEY) -> v1.Project:
    p = project(name, labels={"app": "web"})
    constraint = p.spec.topology_spread_constraints.add(max_skew=1, topology_key=key, when_unsatisfiable=when)
    constraint.label_selector.match_labels["app"] = "web"
    return p


async def test_spread_keeps_max_skew_or_only_prefers_it(client: Client) -> None:
    await add_node(client, "n1", labels={ZONE_KEY: "a"})
    await add_node(client, "n2", labels={ZONE_KEY: "b"})
    await add_node(client, "n3", labels={ZONE_KEY: "b"}, unschedulable=True)
    async with scheduler(client):
        for i in range(4):
            await client.projects.create(spread(f"zone-{i}", "DoNotSchedule", ZONE_KEY))
            await placed_on(client, f"zone-{i}")
        per_zone = await _count(client, lambda p: p.metadata.name.startswith("zone-"), {"n1": "a", "n2": "b"})
        assert per_zone == {"a": 2, "b": 2}
        await client.projects.create(spread("host-0", "DoNotSchedule"))  # n3 is a domain too, though cordoned
        assert await pending_reason(client, "host-0") == (
            "0/3 nodes are available: 1 unschedulable, 2 node(s) would exceed maxSkew 1 in hostname."
        )
        await client.projects.create(spread("anyway", "ScheduleAnyway"))
        assert await placed_on(client, "anyway") in ("n1", "n2")


async def _count(client: Client, chosen: Callable[[v1.Project], bool], domain: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in (await client.projects.list()).items:
        if chosen(p):
            counts[domain[p.status.node_ref]] = counts.get(domain[p.status.node_ref], 0) + 1
    return counts
