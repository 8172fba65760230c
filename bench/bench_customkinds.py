"""Create/update/get of a custom kind (WebFarm, defined at run time) next to the built-in Project, in the same
run, through the same apiserver process. Prints JSON; the ratio custom ÷ Project per operation is what we track
(the goal is ≥ 0.9: a custom kind costs about what a built-in one does).

    .venv/bin/python bench/bench_customkinds.py [--count 2000] [--clients 64] [--rounds 3]

Each round measures Project then WebFarm (each with fresh names); the best round of each counts, so a burst of
load on a shared machine does not decide the ratio. Needs grpcio-tools (the `proto` extra) for the example's
.proto.
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
from benchlib import free_port, goal, wait_serving

from caravanserai.client import Client, ResourceClient
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project
from support.customkinds import define_webfarm, webfarm, webfarm_messages

OPS = ("create_per_s", "update_per_s", "get_per_s")


async def rate(op: Callable[[int], Awaitable[Any]], count: int, *, workers: int) -> float:
    """Operations per second running `op(0..count-1)` over `workers` concurrent loops."""

    async def worker(first: int) -> None:
        for i in range(first, count, workers):
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return round(count / (time.perf_counter() - started), 1)


async def measure(
    rc: ResourceClient[Any], make: Callable[[str], Any], prefix: str, count: int, clients: int
) -> dict[str, float]:
    objs: dict[int, Any] = {}

    async def create(i: int) -> None:
        objs[i] = await rc.create(make(f"{prefix}-{i:06d}"))

    async def update(i: int) -> None:
        obj = objs[i]
        obj.metadata.annotations["n"] = "1"
        objs[i] = await rc.update(obj)

    async def get(i: int) -> None:
        await rc.get(f"{prefix}-{i:06d}")

    return {
        "create_per_s": await rate(create, count, workers=clients),
        "update_per_s": await rate(update, count, workers=clients),
        "get_per_s": await rate(get, count, workers=clients),
    }


def best(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {op: max(r[op] for r in rounds) for op in OPS}


async def run(address: str, opts: argparse.Namespace) -> dict[str, Any]:
    async with Client(address) as client:
        await define_webfarm(client)
        sets = client.resource(webfarm_messages().WebFarm)
        builtin, custom = [], []
        for n in range(opts.rounds):
            builtin.append(
                await measure(client.projects, lambda name: project(name), f"p{n}", opts.count, opts.clients)
            )
            custom.append(
                await measure(sets, lambda name: webfarm(name, replicas=2), f"s{n}", opts.count, opts.clients)
            )
    projects, webfarms = best(builtin), best(custom)
    ratio = {op: round(webfarms[op] / projects[op], 3) for op in OPS}
    return {
        "benchmark": "custom_kind_vs_project",
        "count": opts.count,
        "concurrent_clients": opts.clients,
        "rounds": opts.rounds,
        "cpus": os.cpu_count(),
        "project": projects,
        "webfarm": webfarms,
        "ratio_custom_to_project": ratio,
        "goals": [
            goal(f"custom kind: {op.removesuffix('_per_s')}/s / Project", ratio[op], 0.9, at_most=False) for op in OPS
        ],
    }


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    async with EtcdServer() as etcd:
        address = f"127.0.0.1:{free_port()}"
        exe = os.path.join(os.path.dirname(sys.executable), "cara-apiserver")
        proc = subprocess.Popen(
            [
                exe,
                "--etcd-endpoints",
                etcd.endpoint,
                "--listen",
                address,
                "--metrics-listen",
                "off",
                "--etcd-prefix",
                "/bench-kinds",
                "--log-level",
                "warning",
            ],
            stderr=subprocess.DEVNULL,
        )
        try:
            await wait_serving(address, proc)
            return await run(address, opts)
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
