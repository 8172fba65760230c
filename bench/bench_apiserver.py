"""Writes/s and reads/s through the apiserver next to the same operations sent straight to etcd by the storage
layer, in the same run, against the same etcd. Prints JSON; the ratio is what we track.

    .venv/bin/python bench/bench_apiserver.py [--count 3000] [--clients 64] [--channels 4]

The apiserver runs as its own process (`cara-apiserver`), as in production, so its CPU is not the benchmark's.
"Clients" are concurrent request loops spread over `--channels` gRPC connections. The direct baseline stores the
same serialized project with the same compare-and-swap transactions through `caravanserai.storage.Store`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.storage import EtcdClient, Store
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project
from benchlib import free_port, process_cpu, wait_serving

Op = Callable[[int], Awaitable[Any]]


async def rate(op: Op, count: int, *, workers: int) -> float:
    """Operations per second running `op(0..count-1)` over `workers` concurrent loops."""

    async def worker(first: int) -> None:
        for i in range(first, count, workers):
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return round(count / (time.perf_counter() - started), 1)






async def through_apiserver(address: str, count: int, clients: int, channels: int) -> dict[str, float]:
    pool = [Client(address) for _ in range(channels)]
    objs: dict[int, v1.Project] = {}
    try:
        def c(i: int) -> Client:
            return pool[i % channels]

        async def create(i: int) -> None:
            objs[i] = await c(i).projects.create(project(f"p{i:06d}", labels={"bench": "yes"}))

        async def update(i: int) -> None:
            obj = objs[i]
            obj.metadata.annotations["n"] = "1"
            objs[i] = await c(i).projects.update(obj)

        async def get(i: int) -> None:
            await c(i).projects.get(f"p{i:06d}")

        return {
            "create_per_s": await rate(create, count, workers=clients),
            "update_per_s": await rate(update, count, workers=clients),
            "get_per_s": await rate(get, count, workers=clients),
        }
    finally:
        for client in pool:
            await client.close()


async def direct(endpoint: str, count: int, clients: int) -> dict[str, float]:
    value = project("p000000", labels={"bench": "yes"}).SerializeToString()
    revisions: dict[int, int] = {}
    async with EtcdClient([endpoint]) as etcd:
        store = Store(etcd, prefix="/bench-direct")

        async def create(i: int) -> None:
            revisions[i] = await store.create("projects", f"p{i:06d}", value)

        async def update(i: int) -> None:
            revisions[i] = await store.update("projects", f"p{i:06d}", value, expected_revision=revisions[i])

        async def get(i: int) -> None:
            await store.get("projects", f"p{i:06d}")

        return {
            "create_per_s": await rate(create, count, workers=clients),
            "update_per_s": await rate(update, count, workers=clients),
            "get_per_s": await rate(get, count, workers=clients),
        }




async def main(opts: argparse.Namespace) -> dict[str, Any]:
    async with EtcdServer() as etcd:
        base = await direct(etcd.endpoint, opts.count, opts.clients)
        address = f"127.0.0.1:{free_port()}"
        exe = os.path.join(os.path.dirname(sys.executable), "cara-apiserver")
        proc = subprocess.Popen(
            [exe, "--etcd-endpoints", etcd.endpoint, "--listen", address, "--metrics-listen", "off", "--etcd-prefix", "/bench-api",
             "--log-level", "warning"],
            stderr=subprocess.DEVNULL,
        )
        try:
            await wait_serving(address, proc)
            server_cpu, client_cpu = process_cpu(proc.pid), time.process_time()
            started = time.perf_counter()
            api = await through_apiserver(address, opts.count, opts.clients, opts.channels)
            elapsed = time.perf_counter() - started
            cpu = {
                "apiserver_cpu_share": round((process_cpu(proc.pid) - server_cpu) / elapsed, 2),
                "bench_client_cpu_share": round((time.process_time() - client_cpu) / elapsed, 2),
                "apiserver_cpu_us_per_op": round((process_cpu(proc.pid) - server_cpu) / (3 * opts.count) * 1e6),
            }
        finally:
            proc.terminate()
            proc.wait(10)
    ratio = {k: round(api[k] / base[k], 3) for k in api}
    return {
        "benchmark": "apiserver_vs_direct_store",
        "count": opts.count,
        "concurrent_clients": opts.clients,
        "grpc_channels": opts.channels,
        "cpus": os.cpu_count(),
        "apiserver": api,
        "direct_store": base,
        "ratio_apiserver_to_direct": ratio,
        "cpu_during_apiserver_phase": cpu,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--channels", type=int, default=4)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
