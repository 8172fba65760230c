"""Watch fan-out as a fleet makes it: one apiserver, many watchers, paced updates. Prints JSON.

    .venv/bin/python bench/bench_watch.py [--nodes 5000] [--all-watchers 10] [--rate 500] [--seconds 10]
                                          [--everything-watchers 1000] [--everything-rate 5]

Everything is real and separate: etcd (`EtcdServer`), the apiserver (`cara-apiserver`, its own process, so its
CPU time is its own), the watchers (this script with `--watchers`, its own process) and the writer (this
process). Set-up: one project per simulated node, bound to it (`status.nodeRef=node-NNNN`).

Phases, each `--seconds` long at a fixed pace (every update is its own request, sent on schedule, so a slow
reply does not slow the pace):
1. **no watchers**, at `--rate` and at `--everything-rate`: the apiserver's CPU for the updates alone;
2. **selecting**: `--nodes` watchers each selecting its node's projects (`status.nodeRef=<node>`, as agents do)
   plus `--all-watchers` watchers of every project (as controllers and dashboards do); `--rate` updates/s
   spread over the nodes' projects;
3. **everything**: `--everything-watchers` watchers of every project, `--everything-rate` updates/s.

Each update carries its send time (monotonic clock, shared by processes on one machine) in an annotation; a
watcher measures write → delivered when it decodes the event. A warm-up update of each project before a phase
proves every watch is open. Reported: updates/s achieved, p50/p99 write → delivered over every (watcher,
event), events delivered to a watcher that does not select the object (must be 0), events missing, and the
apiserver's CPU per delivered event above the no-watcher phase at the same rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import structlog
from benchlib import free_port, goal, percentile, process_cpu, start_apiserver, stop, wait_serving

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import CaravanseraiError
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project

SENT = "bench.caravanserai.io/sent"
PHASE = "bench.caravanserai.io/phase"
CHANNELS = 20


def node_name(i: int) -> str:
    return f"node-{i:04d}"


# ---- the watchers process --------------------------------------------------------------------------------------


class Tally:
    """What the watchers of one process received in the measured phase."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.wrong = 0  # events a watcher got for an object it does not select
        self.warm: dict[int, int] = {}  # watcher → warm-up events seen
        self.measured: dict[int, int] = {}  # watcher → measured events seen
        self.errors: dict[str, int] = {}  # streams that failed (and were resumed), by error

    def take(self, index: int, node: str | None, obj: v1.Project) -> None:
        """Count one delivered object for watcher `index` (selecting `node`, or everything)."""
        received = time.monotonic()
        if node and obj.status.node_ref != node:
            self.wrong += 1
        phase = obj.metadata.annotations.get(PHASE)
        if phase == "warm":
            self.warm[index] = self.warm.get(index, 0) + 1
        elif phase == "measure":
            self.measured[index] = self.measured.get(index, 0) + 1
            self.latencies.append(received - float(obj.metadata.annotations[SENT]))


async def watch_one(client: Client, index: int, node: str | None, since: str, tally: Tally) -> None:
    """One watcher; a stream that fails is counted (by error) and resumed from the last version it delivered."""
    version = since
    while True:
        try:
            async for obj in _changes(client, node, version):
                version = obj.metadata.resource_version
                tally.take(index, node, obj)
        except Exception as exc:  # noqa: BLE001 - counted and reported; the watch resumes
            key = f"{type(exc).__name__}: {str(exc)[:120]}"
            tally.errors[key] = tally.errors.get(key, 0) + 1
            await asyncio.sleep(0.5)


async def _changes(client: Client, node: str | None, since: str) -> AsyncIterator[v1.Project]:
    selector = f"status.nodeRef={node}" if node else ""
    async for change in client.projects.watch(resource_version=since, field_selector=selector, allow_bookmarks=False):
        yield change.object


async def run_watchers(address: str, nodes: int, watchers: tuple[int, int], warm: int, since: str) -> dict[str, Any]:
    """Open the watches; print "ready" once each has its warm-up events (updates 0..warm-1); then read
    "done N" (N updates measured) from stdin, wait until every watcher has its share (30 s at most), report."""
    pool = [Client(address, timeout=60) for _ in range(CHANNELS)]
    tally = Tally()
    selecting, everything = watchers
    plan: list[str | None] = [node_name(i) for i in range(selecting)] + [None] * everything
    tasks = [asyncio.create_task(watch_one(pool[i % CHANNELS], i, n, since, tally)) for i, n in enumerate(plan)]
    warm_needed = {i: (_share(warm, nodes, i) if n else warm) for i, n in enumerate(plan)}
    deadline = time.monotonic() + 240
    while any(tally.warm.get(i, 0) < need for i, need in warm_needed.items()):
        if time.monotonic() > deadline:
            cold = sum(tally.warm.get(i, 0) < need for i, need in warm_needed.items())
            print(f"not ready: {cold} watchers without their warm-up events; stream errors {tally.errors}", flush=True)
            raise SystemExit(1)
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    cpu_before, started = time.process_time(), time.monotonic()
    line = await asyncio.to_thread(sys.stdin.readline)
    updates = int(line.split()[1])
    expected = {i: (_share(updates, nodes, i) if n else updates) for i, n in enumerate(plan)}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(tally.measured.get(i, 0) < e for i, e in expected.items()):
        await asyncio.sleep(0.05)
    cpu_share = (time.process_time() - cpu_before) / (time.monotonic() - started)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for client in pool:
        await client.close()
    delivered = sum(tally.measured.values())
    return {
        "delivered": delivered,
        "expected": sum(expected.values()),
        "missing": sum(max(0, e - tally.measured.get(i, 0)) for i, e in expected.items()),
        "wrong": tally.wrong,
        "stream_errors": tally.errors,
        "watchers_process_cpu_share": round(cpu_share, 3),
        "p50_ms": round(percentile(tally.latencies, 50) * 1000, 1),
        "p99_ms": round(percentile(tally.latencies, 99) * 1000, 1),
        "max_ms": round(max(tally.latencies, default=0.0) * 1000, 1),
    }


def _share(updates: int, nodes: int, i: int) -> int:
    """How many of updates 0..updates-1 (update k touches project k % nodes) touch project i."""
    return updates // nodes + (1 if i < updates % nodes else 0)


# ---- the writer (this process) ---------------------------------------------------------------------------------


class Writer:
    """Keeps the latest version of every project and updates them, paced or as fast as allowed."""

    def __init__(self, pool: list[Client], nodes: int) -> None:
        self.pool = pool
        self.nodes = nodes
        self.latest: dict[int, v1.Project] = {}

    async def setup(self) -> None:
        async def one(i: int) -> None:
            created = await self.pool[i % len(self.pool)].projects.create(project(f"fan-{i:04d}"))
            bound = meta.copy(created)
            bound.status.node_ref = node_name(i)
            meta.set_phase(bound, v1.SCHEDULED, reason="Scheduled", message="bound by the benchmark", now=time.time())
            self.latest[i] = await self.pool[i % len(self.pool)].projects.update_status(bound)

        await _bounded(range(self.nodes), one, 32)

    async def update(self, k: int, phase: str) -> None:
        i = k % self.nodes
        obj = meta.copy(self.latest[i])
        obj.metadata.annotations[PHASE] = phase
        obj.metadata.annotations[SENT] = repr(time.monotonic())
        self.latest[i] = await self.pool[k % len(self.pool)].projects.update(obj)

    async def warm_up(self, count: int) -> None:
        await _bounded(range(count), lambda k: self.update(k, "warm"), 32)

    async def paced(self, rate: float, seconds: float, phase: str) -> dict[str, float]:
        """`rate` updates/s for `seconds`, each sent on schedule; updates/s achieved (to the last reply)."""
        count = max(1, round(rate * seconds))
        loop = asyncio.get_running_loop()
        started = loop.time()

        failed = 0

        async def one(k: int) -> None:
            nonlocal failed
            await asyncio.sleep(max(0.0, started + k / rate - loop.time()))
            try:
                await self.update(k, phase)
            except CaravanseraiError:  # the apiserver refused or dropped it (overloaded): counted, not retried
                failed += 1

        await asyncio.gather(*(one(k) for k in range(count)))
        elapsed = loop.time() - started
        done = count - failed
        return {
            "updates": done,
            "failed": failed,
            "seconds": round(elapsed, 2),
            "achieved_per_s": round(done / elapsed, 1),
        }


async def _bounded(items: Any, op: Any, workers: int) -> None:
    queue = list(items)

    async def worker() -> None:
        while queue:
            await op(queue.pop())

    await asyncio.gather(*(worker() for _ in range(workers)))


async def idle_phase(writer: Writer, api_pid: int, rate: float, seconds: float) -> dict[str, float]:
    """Paced updates with no watcher: the apiserver's CPU share and CPU per update."""
    cpu = process_cpu(api_pid)
    result = await writer.paced(rate, seconds, "idle")
    used = process_cpu(api_pid) - cpu
    return result | {"apiserver_cpu_share": round(used / result["seconds"], 3),
                     "apiserver_cpu_us_per_update": round(used / result["updates"] * 1e6)}  # fmt: skip


async def watched_phase(
    writer: Writer, address: str, api_pid: int, watchers: tuple[int, int], rate: float, seconds: float,
    idle: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    """Start the watchers process, warm up, measure `seconds` at `rate`; the watchers' and the CPU figures."""
    selecting, everything = watchers
    warm = writer.nodes if selecting else 1  # every watch proven open by one event at least
    since = (await writer.pool[0].projects.list(limit=1)).resource_version
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--watchers", "--address", address, "--nodes", str(writer.nodes),
        "--selecting", str(selecting), "--everything", str(everything), "--warm", str(warm), "--since", since,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        await writer.warm_up(warm)
        line = await asyncio.wait_for(proc.stdout.readline(), 300)
        if line.strip() != b"ready":
            raise RuntimeError(f"the watchers process did not get ready: {line.decode().strip()}")
        cpu = process_cpu(api_pid)
        written = await writer.paced(rate, seconds, "measure")
        proc.stdin.write(f"done {written['updates']}\n".encode())
        await proc.stdin.drain()
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
        used = process_cpu(api_pid) - cpu  # includes the drain after the last write
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    got: dict[str, Any] = json.loads(out)
    above_idle = used - idle["apiserver_cpu_share"] * written["seconds"]
    return {
        "watchers": {"selecting_one_node": selecting, "all_projects": everything},
        **written,
        "apiserver_cpu_share": round(used / written["seconds"], 3),
        "apiserver_cpu_us_per_delivered_above_idle": round(above_idle / max(got["delivered"], 1) * 1e6, 1),
        "write_to_delivered": got,
    }


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    async with EtcdServer() as etcd:
        address = f"127.0.0.1:{free_port()}"
        api = start_apiserver(etcd.endpoint, address, "/bench-watch", "--compaction-interval", "0")
        pool: list[Client] = []
        try:
            await wait_serving(address, api)
            pool = [Client(address, timeout=60) for _ in range(4)]
            writer = Writer(pool, opts.nodes)
            await writer.setup()
            idle = await idle_phase(writer, api.pid, opts.rate, opts.seconds)
            idle_slow = await idle_phase(writer, api.pid, opts.everything_rate, opts.seconds)
            selecting = await watched_phase(
                writer, address, api.pid, (opts.nodes, opts.all_watchers), opts.rate, opts.seconds, idle
            )
            everything = await watched_phase(
                writer, address, api.pid, (0, opts.everything_watchers), opts.everything_rate, opts.seconds,
                idle_slow,
            )  # fmt: skip
        finally:
            for client in pool:
                await client.close()
            stop(api)
    fan = selecting["write_to_delivered"]
    return {
        "benchmark": "watch_fan_out",
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "no_watchers": {f"{opts.rate:g}_per_s": idle, f"{opts.everything_rate:g}_per_s": idle_slow},
        "selecting": selecting,
        "everything": everything,
        "goals": [
            goal("watch fan-out: p99 write -> delivered (ms)", fan["p99_ms"], 100, at_most=True),
            goal("watch fan-out: events to non-selecting watchers", fan["wrong"], 0, at_most=True),
            goal("watch fan-out: events missing", fan["missing"], 0, at_most=True),
            goal("watch fan-out: updates/s achieved", selecting["achieved_per_s"], opts.rate * 0.98, at_most=False),
            goal(
                "watch fan-out: apiserver CPU per delivered event above no watchers (us)",
                selecting["apiserver_cpu_us_per_delivered_above_idle"],
                100,
                at_most=True,
            ),
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000, help="simulated nodes, one project and one watcher each")
    parser.add_argument("--all-watchers", type=int, default=10, help="watchers of every project beside them")
    parser.add_argument("--rate", type=float, default=500.0, help="updates/s in the selecting phase")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each measured phase")
    parser.add_argument("--everything-watchers", type=int, default=1000)
    parser.add_argument("--everything-rate", type=float, default=5.0)
    parser.add_argument("--watchers", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--selecting", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--everything", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--since", help=argparse.SUPPRESS)
    parser.add_argument("--warm", type=int, help=argparse.SUPPRESS)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    args = parser.parse_args()
    if args.watchers:
        watchers = (args.selecting, args.everything)
        report = asyncio.run(run_watchers(args.address, args.nodes, watchers, args.warm, args.since))
        print(json.dumps(report), flush=True)
    else:
        print(json.dumps(asyncio.run(main(args)), indent=2))
