"""The apiserver's memory with 10,000 and 100,000 projects in its watch cache, and the latency of listing 100,000
projects. Prints JSON.

    .venv/bin/python bench/bench_apiserver_cache.py [--counts 10000,100000] [--lists 3]

The projects are written straight to etcd (one transaction per `BATCH` of them, values as the apiserver itself
encodes them), before a fresh `cara-apiserver` process starts over them; it is ready once its watch caches are
filled (its /readyz answers: it answers Lists from etcd before that), and its resident memory (VmRSS) is read once
it has settled (at least `SETTLE` seconds, then until it is idle: its watch history is replayed). The same
apiserver over an empty prefix gives the memory without projects; the figure per 10,000 is the difference, scaled.
The lists are whole (no limit) `List` calls of every project, serialized in advance and sent with a bare grpc.aio
stub, one after another: p50 and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
import uuid
from typing import Any

import aiohttp
import grpc
import structlog
from benchlib import free_port, goal, percentile, process_cpu, start_apiserver, stop, wait_serving, wait_until

from caravanserai import v1
from caravanserai.apiserver import codec
from caravanserai.storage import EtcdClient
from caravanserai.storage.etcd_types import PutOp
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project

BATCH = 100  # projects per etcd transaction while filling
SETTLE = 5.0  # seconds after it serves, at least, before an apiserver's memory is read
QUIET_CPU = 0.05  # CPU seconds per second below which a ready apiserver counts as settled (its history replayed)
SETTLE_MAX = 300.0  # seconds it may take to settle


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def stored_project(i: int) -> bytes:
    """Project `p<i>` as the apiserver stores one it created (uid, creation time, defaults of a bound project)."""
    obj = project(f"p{i:06d}", labels={"bench": "yes", "team": f"t{i % 50}"})
    obj.metadata.uid = str(uuid.UUID(int=i))
    obj.metadata.namespace = "default"
    obj.metadata.creation_timestamp.FromSeconds(1_700_000_000 + i)
    obj.status.phase = v1.RUNNING
    obj.status.node_ref = f"node-{i % 1000:04d}"
    return bytes(codec.encode(obj))


async def fill(endpoint: str, prefix: str, first: int, last: int) -> None:
    """Write projects first..last-1 under `prefix`, `BATCH` per transaction, four transactions at once."""
    async with EtcdClient([endpoint]) as etcd:
        starts = list(range(first, last, BATCH))

        async def batch(start: int) -> None:
            puts = [
                PutOp(f"{prefix}/projects/default/p{i:06d}".encode(), stored_project(i))
                for i in range(start, min(start + BATCH, last))
            ]
            await etcd.txn(compare=[], success=puts)

        for at in range(0, len(starts), 4):
            await asyncio.gather(*(batch(s) for s in starts[at : at + 4]))


async def serving_rss(endpoint: str, prefix: str) -> tuple[float, float, Any]:
    """A fresh apiserver over `prefix`: (seconds until ready, its RSS in MiB `SETTLE` s later, (process, address))."""
    address, metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    started = time.perf_counter()
    proc = start_apiserver(endpoint, address, prefix, "--metrics-listen", metrics)
    await wait_serving(address, proc, attempts=6000)
    await wait_until(lambda: ready(metrics), "the apiserver's watch caches filled", timeout=600)
    serving = time.perf_counter() - started
    await settled(proc.pid)
    return serving, rss_mib(proc.pid), (proc, address)


async def settled(pid: int) -> None:
    """Wait `SETTLE` seconds, then until process `pid` uses less than `QUIET_CPU` of a core over a second: a ready
    apiserver still replays its watch history from etcd (about 100,000 events with 100,000 projects), and its
    memory read before that ends is too low."""
    await asyncio.sleep(SETTLE)
    deadline = time.perf_counter() + SETTLE_MAX
    while time.perf_counter() < deadline:
        before = process_cpu(pid)
        await asyncio.sleep(1.0)
        if process_cpu(pid) - before < QUIET_CPU:
            return


async def ready(metrics: str) -> bool:
    """Whether the apiserver's /readyz answers 200 (its watch caches are filled; it answers Lists before that)."""
    async with aiohttp.ClientSession() as session, session.get(f"http://{metrics}/readyz") as response:
        return response.status == 200


async def list_latencies(address: str, lists: int) -> list[float]:
    """`lists` whole Lists of projects, one after another: each one's seconds."""
    request = v1.ListRequest(resource="projects").SerializeToString()
    options = [("grpc.max_receive_message_length", 1 << 30)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        call = channel.unary_unary("/caravanserai.v1.Resources/List")
        latencies = []
        for _ in range(lists):
            started = time.perf_counter()
            await call(request)
            latencies.append(time.perf_counter() - started)
    return latencies


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    counts = sorted(opts.counts)
    result: dict[str, Any] = {"benchmark": "apiserver_watch_cache_memory", "cpus": os.cpu_count()}
    async with EtcdServer() as etcd:
        _, empty_rss, (proc, _) = await serving_rss(etcd.endpoint, "/empty")
        stop(proc)
        result["rss_mib_without_projects"] = round(empty_rss, 1)
        filled, by_count = 0, {}
        for count in counts:
            started = time.perf_counter()
            await fill(etcd.endpoint, "/cache", filled, count)
            filled, fill_s = count, time.perf_counter() - started
            start_s, rss, (proc, address) = await serving_rss(etcd.endpoint, "/cache")
            try:
                entry: dict[str, Any] = {
                    "fill_s": round(fill_s, 1),
                    "start_to_serving_s": round(start_s, 1),
                    "rss_mib": round(rss, 1),
                    "rss_mib_per_10k": round((rss - empty_rss) * 10_000 / count, 1),
                }
                if count == counts[-1]:
                    latencies = await list_latencies(address, opts.lists)
                    entry["list_all_ms"] = {
                        "p50": round(percentile(latencies, 50) * 1000),
                        "p99": round(percentile(latencies, 99) * 1000),
                        "lists": opts.lists,
                    }
            finally:
                stop(proc)
            by_count[count] = entry
    result["by_projects"] = by_count
    result["load_average_1m"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    result["goals"] = [
        goal(f"apiserver: RSS per 10,000 projects in the watch cache, {n:,} cached (MiB)", e["rss_mib_per_10k"], 40,
             at_most=True)
        for n, e in by_count.items()
    ]  # fmt: skip
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000])
    parser.add_argument("--lists", type=int, default=3, help="whole Lists timed at the largest count")
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
