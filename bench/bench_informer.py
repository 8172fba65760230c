"""Informer memory per 10,000 cached projects, and events/s delivered to handlers while a writer changes projects
as fast as it can through the API (next to that write rate). Prints JSON.

    .venv/bin/python bench/bench_informer.py [--objects 10000] [--updates 20000] [--clients 64]

Everything is real and separate, as in production: etcd (`EtcdServer`), the apiserver (`cara-apiserver`, its own
process) and the writer (this script with `--writer`, its own process), so the informer's process does nothing but
inform. The informer is the default one (compact: objects kept serialized, decoded on read); the same cache with
`compact=False` is measured beside it for reference. Memory is the informer process's RSS growth from before the first
list to after the sync (freed memory handed back to the OS with malloc_trim first, so only what the cache holds counts),
and the Python-level allocations traced by tracemalloc for a second informer. Throughput counts notifications delivered
to two handlers (a counter and a work-queue add, what a controller does) between the first and the last event of the
update burst; CPU per event is the informer process's CPU time over that window divided by the events. A second burst
read by a bare `client.projects.watch()` loop gives the CPU per event the informer builds on.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import gc
import json
import logging
import os
import sys
import time
import tracemalloc
from typing import Any

import structlog
from benchlib import free_port, goal, start_apiserver, stop, wait_serving

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.client.apply import LAST_APPLIED, applied_form, configuration
from caravanserai.controller import enqueue_object
from caravanserai.informer import Informer
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project
from caravanserai.workqueue import WorkQueue

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def rss_bytes() -> int:
    """Resident set size of this process, after returning freed heap memory to the OS."""
    gc.collect()
    _LIBC.malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_project(i: int) -> v1.Project:
    """A realistic small project as `caractrl apply` stores it: two services with requests, a few labels and
    annotations, and the last-applied annotation (the manifest as JSON)."""
    obj = project(
        f"p{i:06d}",
        services=["web", "db"],
        requests={"cpu": "100m", "memory": "64Mi"},
        labels={"app": f"app-{i % 50}", "tier": "bench", "team": f"t{i % 7}"},
    )
    obj.metadata.annotations["owner"] = f"user-{i % 100}@example.com"
    obj.metadata.annotations[LAST_APPLIED] = configuration(applied_form(obj))
    return obj


# ---- the writer process --------------------------------------------------------------------------------------


async def write(address: str, mode: str, count: int, clients: int, objects: int) -> dict[str, float]:
    """Create `count` projects, or make `count` updates spread over `objects` projects, with `clients` loops."""
    pool = [Client(address, timeout=30) for _ in range(4)]
    latest: dict[int, v1.Project] = {}

    async def loop(first: int) -> None:
        c = pool[first % len(pool)]
        for i in range(first, count, clients):
            if mode == "create":
                await c.projects.create(bench_project(i))
                continue
            n = i % objects
            obj = latest.get(n) or await c.projects.get(f"p{n:06d}")
            obj.metadata.annotations["generation"] = str(i)
            latest[n] = await c.projects.update(obj)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(loop(w) for w in range(clients)))
    finally:
        for c in pool:
            await c.close()
    elapsed = time.perf_counter() - started
    return {"ops": count, "seconds": round(elapsed, 3), "per_s": round(count / elapsed, 1)}


async def run_writer(address: str, mode: str, count: int, clients: int, objects: int) -> dict[str, float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--writer",
        mode,
        "--address",
        address,
        "--count",
        str(count),
        "--clients",
        str(clients),
        "--objects",
        str(objects),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"writer ({mode}) failed with code {proc.returncode}")
    result: dict[str, float] = json.loads(out)
    return result


# ---- the informer process ------------------------------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.events = 0
        self.first = 0.0
        self.last = 0.0

    def hit(self, *_: Any) -> None:
        now = time.perf_counter()
        if not self.events:
            self.first = now
        self.events += 1
        self.last = now


async def measure_memory(
    client: Client, objects: int
) -> tuple[dict[str, Any], Informer[v1.Project], asyncio.Task[None]]:
    before = rss_bytes()
    informer: Informer[v1.Project] = Informer(client.projects)
    started = time.perf_counter()
    task = asyncio.create_task(informer.run())
    await informer.wait_synced()
    sync_seconds = time.perf_counter() - started
    after = rss_bytes()
    assert len(informer.cache) == objects, len(informer.cache)

    tracemalloc.start()
    second: Informer[v1.Project] = Informer(client.projects)
    second_task = asyncio.create_task(second.run())
    await second.wait_synced()
    traced, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    second_task.cancel()
    await asyncio.gather(second_task, return_exceptions=True)
    del second

    per_10k = 10_000 / objects / 2**20
    expanded = await measure_cache(client, objects, compact=False)
    return (
        {
            "objects": objects,
            "rss_delta_mib_per_10k": round((after - before) * per_10k, 1),
            "tracemalloc_mib_per_10k": round(traced * per_10k, 1),
            "initial_list_and_sync_seconds": round(sync_seconds, 3),
            "get_us": read_us(informer),
            "expanded_compact_false": expanded,
        },
        informer,
        task,
    )


def read_us(informer: Informer[v1.Project]) -> float:
    """Microseconds per read: a `get` of every cached name once."""
    names = informer.cache.keys()
    started = time.perf_counter()
    for name in names:
        informer.get(name)
    return round((time.perf_counter() - started) / max(len(names), 1) * 1e6, 1)


async def measure_cache(client: Client, objects: int, *, compact: bool) -> dict[str, Any]:
    """An informer with `compact` given explicitly: RSS growth per 10,000 objects, and the cost of a read."""
    before = rss_bytes()
    informer: Informer[v1.Project] = Informer(client.projects, compact=compact)
    task = asyncio.create_task(informer.run())
    await informer.wait_synced()
    after = rss_bytes()
    read = read_us(informer)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return {"rss_delta_mib_per_10k": round((after - before) * 10_000 / objects / 2**20, 1), "get_us": read}


async def measure_throughput(informer: Informer[v1.Project], address: str, opts: argparse.Namespace) -> dict[str, Any]:
    counter = Counter()
    queue: WorkQueue[str] = WorkQueue()
    informer.add_event_handler(on_update=counter.hit)
    informer.add_event_handler(enqueue_object(queue))
    await asyncio.sleep(0.5)  # the late handlers' synthetic adds are delivered
    counter.events = 0
    cpu_before = time.process_time()
    writes = await run_writer(address, "update", opts.updates, opts.clients, opts.objects)
    deadline = time.perf_counter() + 60
    while counter.events < opts.updates and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    cpu = time.process_time() - cpu_before
    window = max(counter.last - counter.first, 1e-9)
    await queue.shut_down()
    return {
        "updates_written": opts.updates,
        "write_per_s": writes["per_s"],
        "events_delivered": counter.events,
        "events_per_s": round(counter.events / window, 1),
        "informer_cpu_us_per_event": round(cpu / max(counter.events, 1) * 1e6, 1),
        "queue_keys_collapsed_to": len(queue),
    }


async def measure_raw_watch(client: Client, address: str, opts: argparse.Namespace) -> dict[str, Any]:
    """The same update burst read by a bare `client.projects.watch()` loop: the cost the informer builds on."""
    counter = Counter()
    version = (await client.projects.list(limit=1)).resource_version

    async def consume() -> None:
        async for event in client.projects.watch(resource_version=version):
            if event.type == v1.MODIFIED:
                counter.hit()

    task = asyncio.create_task(consume())
    cpu_before = time.process_time()
    await run_writer(address, "update", opts.updates, opts.clients, opts.objects)
    deadline = time.perf_counter() + 60
    while counter.events < opts.updates and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    cpu = time.process_time() - cpu_before
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return {"events": counter.events, "cpu_us_per_event": round(cpu / max(counter.events, 1) * 1e6, 1)}


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    async with EtcdServer() as etcd:
        address = f"127.0.0.1:{free_port()}"
        proc = start_apiserver(etcd.endpoint, address, "/bench-informer", "--compaction-interval", "0")
        try:
            await wait_serving(address, proc)
            creates = await run_writer(address, "create", opts.objects, opts.clients, opts.objects)
            async with Client(address, timeout=60) as client:
                memory, informer, task = await measure_memory(client, opts.objects)
                throughput = await measure_throughput(informer, address, opts)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raw = await measure_raw_watch(client, address, opts)
        finally:
            stop(proc)
    return {
        "benchmark": "informer",
        "cpus": os.cpu_count(),
        "create_per_s": creates["per_s"],
        "memory": memory,
        "throughput": throughput,
        "bare_client_watch_baseline": raw,
        "goals": [
            goal(
                "informer (default, compact): RSS per 10,000 cached projects with last-applied (MiB)",
                memory["rss_delta_mib_per_10k"],
                20,
                at_most=True,
            ),
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--writer", choices=("create", "update"), help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    args = parser.parse_args()
    if args.writer:
        result = asyncio.run(write(args.address, args.writer, args.count, args.clients, args.objects))
        print(json.dumps(result))
    else:
        print(json.dumps(asyncio.run(main(args)), indent=2))
