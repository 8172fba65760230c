"""Scheduler throughput and latency when projects carry placement rules, with simulated nodes in 10 zones. Prints
JSON with the same goal lines as bench_scheduler.py.

    .venv/bin/python bench/bench_scheduler_affinity.py [--nodes 5000] [--projects 10000] [--paced 400 --rate 50]

The set-up is bench_scheduler.py's (a fresh `cara-apiserver` and `cara-scheduler` process, nodes simulated as a Node
of 4 cpu / 8Gi and its Lease renewed by this process), with every node labelled `caravanserai.io/zone=zone-<i % 10>`.
Projects (sizes as in bench_scheduler.py) belong to `app=g<i % 100>`; of them

* every second one carries a preferred anti-affinity (weight 100) to its own app over zones;
* every fourth one a DoNotSchedule spread constraint (maxSkew 1 over zones) over `tier=s<i % 40>`, a label only
  such projects carry (so every project the selector counts is constrained: the skew must hold in the end state);
* every twentieth one a required anti-affinity over `caravanserai.io/hostname` to `solo=k<i % 50>`, which it
  carries (no two of one such group on a node).

Measured: binds/s of `--projects` projects pending when the scheduler starts (from its first binding to its
last; with the scheduler's CPU time over the same span and how busy the machine was, as in bench_scheduler.py);
create→bound percentiles of `--paced` projects created at `--rate`/s afterwards; from the final state read back
from the API (not from the scheduler): nodes overcommitted, required anti-affinity terms violated (two
projects of one `solo` group on one node) and spread constraints violated (a `tier` group whose most and least
loaded zones differ by more than 1).

Also measured, in this process and on CPU time (so that a shared, loaded machine blurs it less): decisions per
second of the scheduler's own code (`ClusterState`, `schedule`, the explanation, `assume`) over the same
`--nodes`, for `--in-process` projects with these rules and for as many plain ones, and their ratio.

The pending phase must bind everything within `--pending-timeout` seconds (default: 300, or more for more
projects: at least 25 binds/s is asked of a run before it is called failed rather than slow).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import time
from collections import Counter, defaultdict
from typing import Any

import structlog
from bench_scheduler import SIZES, measure_pending, ms, overcommitted_nodes, spawn
from benchlib import free_port, goal, start_apiserver, stop, wait_serving
from simcluster import BindWatch, SimulatedNodes, run_concurrently

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import timestamp
from caravanserai.controllers.scheduler import explain
from caravanserai.controllers.scheduler.algorithm import Policy, schedule
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.filters import FilterContext
from caravanserai.controllers.scheduler.snapshot import project_info
from caravanserai.project.affinity import HOSTNAME_KEY, ZONE_KEY
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import lease, node, node_status, project

ZONES = 10


class ZonedNodes(SimulatedNodes):
    """SimulatedNodes whose nodes carry `caravanserai.io/zone` (zone-0 … zone-9, round robin)."""

    async def create(self) -> None:
        async def one(i: int) -> None:
            name = self.names[i]
            created = await self.client.nodes.create(node(name, labels={ZONE_KEY: f"zone-{i % ZONES}"}))
            await self.client.nodes.update_status(node_status(created, cpu="4", memory="8Gi"))
            fresh = lease(name)
            fresh.spec.renew_time.CopyFrom(timestamp(time.time()))
            self.leases[name] = await self.client.leases.create(fresh)

        await run_concurrently(len(self.names), 64, one)


def ruled_project(name: str, i: int, rng: random.Random) -> v1.Project:
    """Project number `i` with the rules the module docstring lists."""
    cpu, memory = rng.choice(SIZES)
    labels = {"app": f"g{i % 100}"}
    if i % 4 == 0:
        labels["tier"] = f"s{i % 40}"
    if i % 20 == 0:
        labels["solo"] = f"k{i % 50}"
    p = project(name, requests={"cpu": cpu, "memory": memory}, labels=labels)
    if i % 2 == 0:
        term = p.spec.affinity.project_anti_affinity.preferred.add(weight=100).term
        term.topology_key = ZONE_KEY
        term.label_selector.match_labels["app"] = labels["app"]
    if i % 4 == 0:
        spread = p.spec.topology_spread_constraints.add(max_skew=1, topology_key=ZONE_KEY)
        spread.label_selector.match_labels["tier"] = labels["tier"]
    if i % 20 == 0:
        solo = p.spec.affinity.project_anti_affinity.required.add(topology_key=HOSTNAME_KEY)
        solo.label_selector.match_labels["solo"] = labels["solo"]
    return p


async def create_ruled(
    client: Client, names: list[str], first: int, *, workers: int, rate: float | None
) -> dict[str, float]:
    """Create the projects (as fast as `workers` allow, or paced at `rate`/s); returns each one's create time."""
    sent: dict[str, float] = {}
    rng = random.Random(first)
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def one(i: int) -> None:
        if rate is not None:
            await asyncio.sleep(max(0.0, started + i / rate - loop.time()))
        obj = ruled_project(names[i], first + i, rng)
        sent[names[i]] = time.perf_counter()
        await client.projects.create(obj)

    await run_concurrently(len(names), workers, one)
    return sent


def decisions_per_cpu_second(nodes: int, projects: list[v1.Project]) -> float:
    """Decisions per CPU second of the scheduler's code placing `projects` one by one on `nodes` fresh zoned
    nodes (decide, explain, assume: what the reconciler does per binding, without the writes)."""
    state, now = ClusterState(), time.time()
    for i in range(nodes):
        name = f"node-{i:05d}"
        state.upsert_node(node_status(node(name, labels={ZONE_KEY: f"zone-{i % ZONES}"}), cpu="4", memory="8Gi"))
        fresh = lease(name)
        fresh.spec.renew_time.CopyFrom(timestamp(now))
        state.set_lease(fresh)
    policy, ctx = Policy(), FilterContext(now=now, topology=state.topology)
    started = time.process_time()
    for obj in projects:
        info = project_info(obj, state.image_sizes)
        listed = state.nodes()
        decision = schedule(info, listed, ctx, start=state.next_start, policy=policy)
        state.next_start = (state.next_start + decision.visited) % len(listed)
        if decision.node is not None:
            explain.placement_scores(info, decision, state.node, policy=policy, topology=state.topology)
            state.assume(info, decision.node)
    return len(projects) / (time.process_time() - started)


def in_process(nodes: int, count: int) -> dict[str, float]:
    """Decisions per CPU second with the rules and without (plain projects of the same sizes), and the ratio."""
    rng = random.Random(0)
    ruled = [ruled_project(f"p-{i:05d}", i, rng) for i in range(count)]
    rng = random.Random(0)
    plain = [
        project(f"p-{i:05d}", requests=dict(zip(("cpu", "memory"), rng.choice(SIZES), strict=True)),
                labels={"app": f"g{i % 100}"})
        for i in range(count)
    ]  # fmt: skip
    with_rules, without = decisions_per_cpu_second(nodes, ruled), decisions_per_cpu_second(nodes, plain)
    return {
        "projects": count,
        "decisions_per_cpu_s_with_rules": round(with_rules, 1),
        "decisions_per_cpu_s_plain": round(without, 1),
        "ratio_with_rules_to_plain": round(with_rules / without, 2),
    }


async def violations(client: Client) -> dict[str, int]:
    """Required terms violated in the final state, read back from the API."""
    zone_of = {n.metadata.name: n.metadata.labels.get(ZONE_KEY, "") for n in (await client.nodes.list()).items}
    solo_nodes: dict[str, Counter[str]] = defaultdict(Counter)
    tier_zones: dict[str, Counter[str]] = defaultdict(Counter)
    for p in (await client.projects.list()).items:
        if p.status.phase not in v1.BOUND_PHASES or not p.status.node_ref:
            continue
        labels = p.metadata.labels
        if "solo" in labels:
            solo_nodes[labels["solo"]][p.status.node_ref] += 1
        if "tier" in labels:
            tier_zones[labels["tier"]][zone_of[p.status.node_ref]] += 1
    anti = sum(count - 1 for nodes in solo_nodes.values() for count in nodes.values() if count > 1)
    spread = 0
    for zones in tier_zones.values():
        counts = [zones.get(f"zone-{z}", 0) for z in range(ZONES)]
        spread += max(counts) - min(counts) > 1
    return {"anti_affinity_violations": anti, "spread_violations": spread}


async def scenario(endpoint: str, opts: argparse.Namespace) -> dict[str, Any]:
    address, metrics = f"127.0.0.1:{free_port()}", free_port()
    api = start_apiserver(endpoint, address, f"/bench-affinity-{opts.nodes}")
    scheduler = None
    renewing: asyncio.Task[None] | None = None
    try:
        await wait_serving(address, api)
        async with Client(address, timeout=60, retry_timeout=60) as client:
            sim = ZonedNodes(client, opts.nodes)
            await sim.create()
            renewing = asyncio.create_task(sim.renew_forever(opts.renew_cycle))
            watch = BindWatch()
            watching = asyncio.create_task(watch.run(client))
            try:
                await asyncio.sleep(0.5)

                def start_scheduler() -> Any:
                    return spawn(["cara-scheduler", "--server", address, "--no-leader-elect", "--metrics-port",
                                  str(metrics), "--log-level", "warning"])  # fmt: skip

                async def create_pending(names: list[str]) -> None:
                    await create_ruled(client, names, 0, workers=32, rate=None)

                scheduler, pending = await measure_pending(
                    client, watch, start_scheduler, opts, create=create_pending, timeout=opts.pending_timeout
                )
                paced = [f"paced-{i:05d}" for i in range(opts.paced)]
                sent = await create_ruled(client, paced, opts.projects, workers=64, rate=opts.rate)
                await watch.wait_all(paced, 120)
            finally:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
            over, bound = await overcommitted_nodes(client)
            return {
                "nodes": opts.nodes,
                "zones": ZONES,
                "pending": pending,
                "paced": {
                    "projects": len(paced),
                    "rate_per_s": opts.rate,
                    "create_to_bound": ms([watch.bound_at[n] - sent[n] for n in paced]),
                },
                "projects_bound": bound,
                "overcommitted_nodes": over,
                **await violations(client),
            }
    finally:
        if renewing is not None:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
        for proc in (scheduler, api):
            if proc is not None:
                stop(proc)


def goals_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    at = f"{run['nodes']} nodes, {run['pending']['projects']} pending with affinity and spread"
    return [
        goal(f"scheduler with placement rules: binds/s ({at})", run["pending"]["bound_per_s"], 300, at_most=False),
        goal(
            f"scheduler with placement rules: p99 create -> bound at {run['paced']['rate_per_s']:g}/s (ms)",
            run["paced"]["create_to_bound"]["p99_ms"],
            1000,
            at_most=True,
        ),
        goal("scheduler with placement rules: overcommitted nodes", run["overcommitted_nodes"], 0, at_most=True),
        goal(
            "scheduler with placement rules: violated required terms (final state)",
            run["anti_affinity_violations"] + run["spread_violations"],
            0,
            at_most=True,
        ),
    ]


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    async with EtcdServer() as etcd:
        run = await scenario(etcd.endpoint, opts)
    if opts.in_process:
        run["in_process"] = in_process(opts.nodes, opts.in_process)
    return {
        "benchmark": "scheduler_affinity",
        "cpus": os.cpu_count(),
        "load_average_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "run": run,
        "goals": goals_of(run),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--projects", type=int, default=10_000, help="projects pending before the scheduler starts")
    parser.add_argument("--paced", type=int, default=400, help="projects created at --rate")
    parser.add_argument("--rate", type=float, default=50.0, help="creations per second of the paced phase")
    parser.add_argument("--in-process", type=int, default=2000, help="projects of the in-process comparison (0: none)")
    parser.add_argument("--pending-timeout", type=float, default=None, help="seconds the pending phase may take")
    parser.add_argument("--renew-cycle", type=float, default=60.0, help="seconds in which every Lease is renewed")
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
