"""Scheduler throughput and create→bound latency with simulated nodes, next to raw etcd compare-and-swap
throughput measured in the same run. Prints JSON.

    .venv/bin/python bench/bench_scheduler.py [--nodes 1000,5000,20000] [--projects N] [--paced 400 --rate 50]

The default is the curve the performance issue asks for: 1,000, 5,000 and 20,000 nodes, each with twice as many
projects (goal: >= 300 binds/s at each, 20,000 included).

Set-up per node count: a fresh `cara-apiserver` process (its own etcd prefix) and a fresh `cara-scheduler`
process (`--no-leader-elect`), as in production, so neither's CPU is the benchmark's. Nodes are simulated: a Node
(allocatable 4 cpu, 8Gi) and its Lease, renewed by one task of this process in a `--renew-cycle` (each Lease once
per cycle, paced evenly; no agents, no Docker).

Measured per node count:
* **pending**: `--projects` projects created before the scheduler process starts (all Pending, as after an outage
  or a big apply), then the scheduler started: binds/s from its first binding to its last (the goal figure), the
  time from its start to its first binding (listing and syncing its caches), and its CPU milliseconds per binding
  (start-up included); and from its first binding to its last (`while_binding`, sampled every 0.2 s): its CPU
  milliseconds per binding, bindings per CPU second of it, the share of one core it used, and how busy the whole
  machine was (every process, other work on a shared machine included);
* **burst**: `--projects` projects created as fast as 32 concurrent clients can; bound/s from the first create to
  the last binding seen on a watch, and create→bound latency percentiles (queueing included: the burst is far
  faster than any scheduler, so the p99 is the backlog);
* **paced**: `--paced` projects created at `--rate` per second: latency percentiles at a sustainable load;
* the scheduler process's CPU seconds and peak RSS over the run, and the scheduler's and the apiserver's CPU
  milliseconds per binding in the burst (the apiserver's include the creates, watches and Lease renewals);
* the Scheduled events: how many were written (the scheduler writes them after the bindings) and how long after
  the last binding the last of them came;
* **overcommit**: after the run, the requests bound to each node against its allocatable (must be 0 nodes over).

The baseline: compare-and-swap updates (etcd transactions comparing mod_revision) straight to the same etcd
through `caravanserai.storage.Store`, serial and 64 concurrent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from benchlib import CpuSampler, free_port, goal, pending_timeout, process_cpu, start_apiserver, stop, wait_serving
from simcluster import BindWatch, SimulatedNodes, run_concurrently

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.controllers.scheduler.resources import parse_resources, project_requests
from caravanserai.storage import EtcdClient, Store
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project

SIZES = [("100m", "128Mi"), ("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi")]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))] if ordered else 0.0


def ms(values: list[float]) -> dict[str, float]:
    return {f"p{q}_ms": round(percentile(values, q) * 1000, 1) for q in (50, 90, 99)} | {
        "max_ms": round(max(values, default=0.0) * 1000, 1)
    }


# ---- baseline --------------------------------------------------------------------------------------------------


async def etcd_cas_baseline(endpoint: str, count: int) -> dict[str, float]:
    """Compare-and-swap updates/s straight to etcd through the Store: serial and 64 concurrent."""
    value = project("p", requests={"cpu": "100m"}).SerializeToString()
    async with EtcdClient([endpoint]) as etcd:
        store = Store(etcd, prefix="/bench-scheduler-baseline")
        revisions = {i: await store.create("projects", f"p{i:06d}", value) for i in range(count)}

        async def cas(i: int) -> None:
            revisions[i] = await store.update("projects", f"p{i:06d}", value, expected_revision=revisions[i])

        result = {}
        for label, workers in (("serial_cas_per_s", 1), ("concurrent64_cas_per_s", 64)):
            started = time.perf_counter()
            await run_concurrently(count, workers, cas)
            result[label] = round(count / (time.perf_counter() - started), 1)
        return result


# ---- processes -------------------------------------------------------------------------------------------------


def spawn(args: list[str]) -> subprocess.Popen[bytes]:
    exe = os.path.join(os.path.dirname(sys.executable), args[0])
    return subprocess.Popen([exe, *args[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def wait_http_ok(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process serving {url} exited during start-up")
        try:
            await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=2).read())
            return
        except OSError:
            await asyncio.sleep(0.2)
    raise TimeoutError(f"{url} not ready")


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# ---- measurement -----------------------------------------------------------------------------------------------


async def create_projects(
    client: Client, names: list[str], rng: random.Random, *, workers: int, rate: float | None
) -> dict[str, float]:
    """Create the projects (as fast as `workers` allow, or paced at `rate`/s); returns each one's create time."""
    sent: dict[str, float] = {}
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def one(i: int) -> None:
        if rate is not None:
            await asyncio.sleep(max(0.0, started + i / rate - loop.time()))
        cpu, memory = rng.choice(SIZES)
        sent[names[i]] = time.perf_counter()
        await client.projects.create(project(names[i], requests={"cpu": cpu, "memory": memory}))

    await run_concurrently(len(names), workers, one)
    return sent


async def overcommitted_nodes(client: Client) -> tuple[int, int]:
    """(nodes whose bound requests exceed allocatable, projects bound)."""
    allocatable = {n.metadata.name: parse_resources(n.status.allocatable) for n in (await client.nodes.list()).items}
    used: dict[str, dict[str, int]] = defaultdict(dict)
    bound = 0
    for p in (await client.projects.list()).items:
        if p.status.phase in v1.BOUND_PHASES and p.status.node_ref:
            bound += 1
            for resource, amount in project_requests(p).items():
                used[p.status.node_ref][resource] = used[p.status.node_ref].get(resource, 0) + amount
    over = sum(
        any(amount > allocatable.get(name, {}).get(r, 0) for r, amount in amounts.items())
        for name, amounts in used.items()
    )
    return over, bound


async def scheduled_events(client: Client, expected: int, since: float, timeout: float = 120.0) -> dict[str, Any]:
    """How many Scheduled events exist once `expected` do (or `timeout` passed), and how long after `since` (the
    last binding) the last of them came: the scheduler writes them after the bindings."""
    deadline = time.perf_counter() + timeout
    while True:
        events = (await client.events.list(field_selector="reason=Scheduled")).items
        if len(events) >= expected or time.perf_counter() > deadline:
            return {"written": len(events), "of": expected, "all_written_s_after_last_bind":
                    round(time.perf_counter() - since, 1) if len(events) >= expected else None}  # fmt: skip
        await asyncio.sleep(1.0)


async def measure_pending(
    client: Client,
    watch: BindWatch,
    start_scheduler: Callable[[], subprocess.Popen[bytes]],
    opts: argparse.Namespace,
    nodes: int = 0,
    *,
    create: Callable[[list[str]], Awaitable[Any]] | None = None,
    timeout: float | None = None,
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """The pending projects (`projects_for`; made by `create`, default plain ones), then the scheduler started:
    (its process, the figures). They must all be bound within `timeout` seconds (default `pending_timeout`)."""
    names = [f"pending-{i:05d}" for i in range(projects_for(opts, nodes))]
    if create is None:
        await create_projects(client, names, random.Random(len(names)), workers=32, rate=None)
    else:
        await create(names)
    await asyncio.sleep(0.5)  # the watch has seen the creates
    started = time.perf_counter()
    scheduler = start_scheduler()
    sampler = CpuSampler(scheduler.pid)
    sampling = asyncio.create_task(sampler.run())
    try:
        await watch.wait_all(names, pending_timeout(len(names)) if timeout is None else timeout)
    except BaseException:
        stop(scheduler)  # the caller never gets it: stop it here
        raise
    finally:
        sampling.cancel()
        await asyncio.gather(sampling, return_exceptions=True)
    cpu = process_cpu(scheduler.pid)
    first, last = min(watch.bound_at[n] for n in names), max(watch.bound_at[n] for n in names)
    binding_cpu, machine_cpu, wall = sampler.between(first, last)
    return scheduler, {
        "projects": len(names),
        "bound_per_s": round(len(names) / (last - first), 1),
        "start_to_first_bind_s": round(first - started, 2),
        "start_to_last_bind_s": round(last - started, 2),
        "scheduler_cpu_ms_per_bind": round(cpu * 1000 / len(names), 2),
        # CPU time from the first binding to the last (start-up excluded), and how busy the whole machine was then
        "while_binding": {
            "scheduler_cpu_ms_per_bind": round(binding_cpu * 1000 / len(names), 3),
            "binds_per_scheduler_cpu_s": round(len(names) / binding_cpu, 1) if binding_cpu else None,
            "scheduler_cpu_share_of_one_core": round(binding_cpu / wall, 2) if wall else None,
            "machine_cpu_busy_share": round(machine_cpu / wall / (os.cpu_count() or 1), 2) if wall else None,
        },
    }


async def measure(
    client: Client, watch: BindWatch, scheduler_pid: int, apiserver_pid: int, nodes: int, opts: argparse.Namespace
) -> dict[str, Any]:
    """The burst, then the paced phase, against a running scheduler; numbers as the module docstring lists."""
    cpu_before = process_cpu(scheduler_pid)
    api_cpu_before = process_cpu(apiserver_pid)
    rng = random.Random(nodes)
    burst = [f"burst-{i:05d}" for i in range(projects_for(opts, nodes))]
    sent = await create_projects(client, burst, rng, workers=32, rate=None)
    created = time.perf_counter()
    await watch.wait_all(burst, pending_timeout(len(burst)))
    first, last = min(sent.values()), max(watch.bound_at[n] for n in burst)
    burst_cpu = (process_cpu(scheduler_pid) - cpu_before, process_cpu(apiserver_pid) - api_cpu_before)
    paced = [f"paced-{i:05d}" for i in range(opts.paced)]
    sent_paced = await create_projects(client, paced, rng, workers=64, rate=opts.rate)
    await watch.wait_all(paced, 120)
    cpu_used = process_cpu(scheduler_pid) - cpu_before
    last_bind = max(watch.bound_at.values())
    over, bound = await overcommitted_nodes(client)
    return {
        "burst": {
            "projects": len(burst),
            "bound_per_s": round(len(burst) / (last - first), 1),
            "created_per_s": round(len(burst) / (created - first), 1),
            "create_to_bound": ms([watch.bound_at[n] - sent[n] for n in burst]),
            "cpu_ms_per_bind": {
                "scheduler": round(burst_cpu[0] * 1000 / len(burst), 2),
                "apiserver": round(burst_cpu[1] * 1000 / len(burst), 2),
            },
        },
        "paced": {
            "projects": len(paced),
            "rate_per_s": opts.rate,
            "create_to_bound": ms([watch.bound_at[n] - sent_paced[n] for n in paced]),
        },
        "scheduler_process": {"cpu_s": round(cpu_used, 1), "peak_rss_mib": peak_rss_mib(scheduler_pid)},
        "projects_bound": bound,
        "overcommitted_nodes": over,
        "scheduled_events": await scheduled_events(client, bound, last_bind),
    }


async def scenario(endpoint: str, nodes: int, opts: argparse.Namespace) -> dict[str, Any]:
    """A fresh apiserver and scheduler over `nodes` simulated nodes; the measurements of `measure`."""
    address, metrics = f"127.0.0.1:{free_port()}", free_port()
    api = start_apiserver(endpoint, address, f"/bench-scheduler-{nodes}")
    scheduler: subprocess.Popen[bytes] | None = None
    renewing: asyncio.Task[None] | None = None
    try:
        await wait_serving(address, api)
        async with Client(address, timeout=60, retry_timeout=60) as client:
            sim = SimulatedNodes(client, nodes)
            started = time.perf_counter()
            await sim.create()
            setup_s = time.perf_counter() - started
            renewing = asyncio.create_task(sim.renew_forever(opts.renew_cycle))
            watch = BindWatch()
            watching = asyncio.create_task(watch.run(client))
            try:
                await asyncio.sleep(0.5)

                def start_scheduler() -> subprocess.Popen[bytes]:
                    return spawn(["cara-scheduler", "--server", address, "--no-leader-elect", "--metrics-port",
                                  str(metrics), "--log-level", "warning"])  # fmt: skip

                scheduler, pending = await measure_pending(client, watch, start_scheduler, opts, nodes)
                await wait_http_ok(f"http://127.0.0.1:{metrics}/readyz", scheduler)
                result = await measure(client, watch, scheduler.pid, api.pid, nodes, opts)
            finally:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
        return {
            "nodes": nodes,
            "node_setup_s": round(setup_s, 1),
            "lease_renewals_per_s": round(nodes / opts.renew_cycle, 1),
            # how late the worst renewal started (nodes count as down past the scheduler's 90 s heartbeat timeout)
            "lease_renewal_max_lag_s": round(sim.max_lag_s, 2),
            "pending": pending,
            **result,
        }
    finally:
        if renewing is not None:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
        for proc in (scheduler, api):
            if proc is not None:
                stop(proc)


async def measured(endpoint: str, nodes: int, opts: argparse.Namespace) -> dict[str, Any]:
    """`scenario` for `nodes`; when its projects are not bound in time, the error in place of its figures (the
    other node counts are still measured)."""
    try:
        return await scenario(endpoint, nodes, opts)
    except TimeoutError as exc:
        return {"nodes": nodes, "error": str(exc)}


def projects_for(opts: argparse.Namespace, nodes: int) -> int:
    """Projects pending (and in the burst) with `nodes` nodes: `--projects`, or by default twice the nodes."""
    return int(opts.projects) if opts.projects else 2 * nodes


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    async with EtcdServer() as etcd:
        baseline = await etcd_cas_baseline(etcd.endpoint, opts.baseline_count)
        runs = [await measured(etcd.endpoint, n, opts) for n in opts.nodes]
    return {
        "benchmark": "scheduler",
        "cpus": os.cpu_count(),
        "load_average_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "etcd_cas_baseline": baseline,
        "runs": runs,
        "zero_overcommit": all(run.get("overcommitted_nodes") == 0 for run in runs),
        "goals": [line for run in runs for line in goals_of(run)],
    }


def goals_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's scheduler goals for one node count (the p99 is the paced phase's: the burst's is backlog)."""
    if "error" in run:
        return [goal(f"scheduler: binds/s ({run['nodes']} nodes)", None, 300, at_most=False) | {"error": run["error"]}]
    at = f"{run['nodes']} nodes, {run['pending']['projects']} pending"
    return [
        goal(f"scheduler: binds/s ({at})", run["pending"]["bound_per_s"], 300, at_most=False),
        goal(
            f"scheduler: p99 create -> bound at {run['paced']['rate_per_s']:g}/s (ms)",
            run["paced"]["create_to_bound"]["p99_ms"],
            1000,
            at_most=True,
        ),
        goal("scheduler: overcommitted nodes", run["overcommitted_nodes"], 0, at_most=True),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 5000, 20000])
    parser.add_argument(
        "--projects",
        type=int,
        default=0,
        help="projects pending before the scheduler starts, and again in the burst (default: twice the nodes)",
    )
    parser.add_argument("--paced", type=int, default=400, help="projects created at --rate")
    parser.add_argument("--rate", type=float, default=50.0, help="creations per second of the paced phase")
    parser.add_argument("--renew-cycle", type=float, default=60.0, help="seconds in which every Lease is renewed")
    parser.add_argument("--baseline-count", type=int, default=2000)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
