"""Preemption latency on a full cluster: from a high-priority project's creation to its binding decision (the
nomination), with simulated nodes. Prints JSON.

    .venv/bin/python bench/bench_preemption.py [--nodes 5000] [--running 10000] [--preemptors 100 --rate 5]

Set-up: a fresh `cara-apiserver` and `cara-scheduler` process (as `bench_scheduler.py`, whose simulated nodes and
helpers this reuses): `--nodes` nodes of 4 cpu / 8 GiB with Leases renewed by this process, and `--running`
projects bound and Running on them two per node (2 cpu each: every node full), of priorities 0 to 3.

Measured: `--preemptors` projects of priority 100 asking for 2 cpu, created at `--rate` per second. None fits, so
each evicts one project: the scheduler compares every node's lower-priority projects and picks the smallest set
(one project of the lowest priority, the newest). The figure is create → `status.nominatedNodeName` seen on a
watch (the decision and its write; the eviction and the victim's leaving are excluded), and, for reference,
create → bound (after the victim left). Checked from the final state: each preemptor evicted exactly one victim,
every victim of priority 0, no node overcommitted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import subprocess
import time
from typing import Any

import structlog
from bench_scheduler import ms, overcommitted_nodes, peak_rss_mib, spawn, wait_http_ok
from benchlib import free_port, goal, machine_busy_cpu, process_cpu, start_apiserver, stop, wait_serving
from simcluster import SimulatedNodes, run_concurrently

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.project import lifecycle
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project

CLOCK = SystemClock()
PREEMPTOR_PRIORITY = 100


class NominationWatch:
    """When each preemptor is first seen nominated, and first seen bound."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.nominated_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}

    async def run(self, client: Client) -> None:
        start = (await client.projects.list(limit=1)).resource_version
        async for event in client.projects.watch(resource_version=start):
            p = event.object
            if event.type == v1.BOOKMARK or p.metadata.name not in self.names:
                continue
            now = time.perf_counter()
            if p.status.nominated_node_name or p.status.phase == v1.SCHEDULED:
                self.nominated_at.setdefault(p.metadata.name, now)
            if p.status.phase == v1.SCHEDULED:
                self.bound_at.setdefault(p.metadata.name, now)


async def fill(client: Client, nodes: list[str], count: int) -> None:
    """`count` projects Running two per node, 2 cpu each, priorities 0..3 (seeded)."""
    rng = random.Random(count)

    async def one(i: int) -> None:
        name = f"run-{i:05d}"
        created = await client.projects.create(
            project(name, requests={"cpu": "2", "memory": "1Gi"}, priority=rng.randint(0, 3))
        )
        bound = await client.projects.update_status(lifecycle.bind(created, nodes[i // 2], now=CLOCK.now()))
        await client.projects.update_status(lifecycle.run(bound, reason="Started", message="up", now=CLOCK.now()))

    await run_concurrently(count, 32, one)


async def measure(client: Client, scheduler_pid: int, opts: argparse.Namespace) -> dict[str, Any]:
    names = [f"urgent-{i:04d}" for i in range(opts.preemptors)]
    watch = NominationWatch(set(names))
    watching = asyncio.create_task(watch.run(client))
    cpu_before, machine_before, wall_before = process_cpu(scheduler_pid), machine_busy_cpu(), time.perf_counter()
    try:
        await asyncio.sleep(0.5)
        sent: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        started = loop.time()
        for i, name in enumerate(names):
            await asyncio.sleep(max(0.0, started + i / opts.rate - loop.time()))
            sent[name] = time.perf_counter()
            await client.projects.create(
                project(name, requests={"cpu": "2", "memory": "1Gi"}, priority=PREEMPTOR_PRIORITY)
            )
        deadline = time.perf_counter() + 60
        while len(watch.bound_at) < len(names) and time.perf_counter() < deadline:
            await asyncio.sleep(0.2)
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
    victims = [
        p
        for p in (await client.projects.list()).items
        if meta.get_condition(p.status.conditions, v1.CONDITION_PREEMPTED) is not None
    ]
    over, bound = await overcommitted_nodes(client)
    return {
        "preemptors": len(names),
        "rate_per_s": opts.rate,
        "nominated": len(watch.nominated_at),
        "bound": len(watch.bound_at),
        "create_to_nominated": ms([watch.nominated_at[n] - sent[n] for n in names if n in watch.nominated_at]),
        "create_to_bound": ms([watch.bound_at[n] - sent[n] for n in names if n in watch.bound_at]),
        "victims": len(victims),
        "victim_priorities": sorted({p.spec.priority for p in victims}),
        "scheduler_cpu_ms_per_preemptor": round((process_cpu(scheduler_pid) - cpu_before) * 1000 / len(names), 1),
        # how busy the whole machine was meanwhile (every process, other work on a shared machine included)
        "machine_cpu_busy_share": round(
            (machine_busy_cpu() - machine_before) / (time.perf_counter() - wall_before) / (os.cpu_count() or 1), 2
        ),
        "scheduler_peak_rss_mib": peak_rss_mib(scheduler_pid),
        "projects_bound": bound,
        "overcommitted_nodes": over,
    }


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    async with EtcdServer() as etcd:
        address, metrics = f"127.0.0.1:{free_port()}", free_port()
        api = start_apiserver(etcd.endpoint, address, "/bench-preemption")
        scheduler: subprocess.Popen[bytes] | None = None
        renewing: asyncio.Task[None] | None = None
        try:
            await wait_serving(address, api)
            async with Client(address, timeout=60, retry_timeout=60) as client:
                sim = SimulatedNodes(client, opts.nodes)
                started = time.perf_counter()
                await sim.create()
                renewing = asyncio.create_task(sim.renew_forever(opts.renew_cycle))
                await fill(client, sim.names, opts.running)
                setup_s = time.perf_counter() - started
                scheduler = spawn(["cara-scheduler", "--server", address, "--no-leader-elect", "--metrics-port",
                                   str(metrics), "--log-level", "warning"])  # fmt: skip
                await wait_http_ok(f"http://127.0.0.1:{metrics}/readyz", scheduler)
                await asyncio.sleep(2.0)  # caches synced and the start-up wake-ups done
                result = await measure(client, scheduler.pid, opts)
        finally:
            if renewing is not None:
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
            for proc in (scheduler, api):
                if proc is not None:
                    stop(proc)
    run = {"nodes": opts.nodes, "running": opts.running, "setup_s": round(setup_s, 1), **result}
    return {"benchmark": "preemption", "cpus": os.cpu_count(), "run": run, "goals": goals_of(run)}


def goals_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    at = f"{run['nodes']} nodes, {run['running']} running"
    everyone = run["nominated"] == run["preemptors"]
    minimal = run["victims"] == run["preemptors"] and run["victim_priorities"] in ([0], [])
    return [
        goal(
            f"preemption: p99 create -> nominated ({at}) (ms)",
            run["create_to_nominated"]["p99_ms"] if everyone else None,
            100,
            at_most=True,
        ),
        goal("preemption: victims beyond one lowest-priority project each", 0 if minimal else 1, 0, at_most=True),
        goal("preemption: overcommitted nodes", run["overcommitted_nodes"], 0, at_most=True),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=10_000, help="projects running before (two per node)")
    parser.add_argument("--preemptors", type=int, default=100)
    parser.add_argument("--rate", type=float, default=5.0, help="preemptors created per second")
    parser.add_argument("--renew-cycle", type=float, default=60.0, help="seconds in which every Lease is renewed")
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
