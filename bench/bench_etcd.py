"""Throughput of the raw etcd client and of the Store over it, printed as JSON.

    .venv/bin/python bench/bench_etcd.py [--sequential 2000] [--concurrent 6000] [--workers 64]

Each scenario (raw client or store, sequential or concurrent) runs against a fresh etcd it starts itself
(`caravanserai.testing.EtcdServer`), so one scenario's history does not slow the next. Values are
`--value-bytes` long. Sequential rates are bounded by etcd's commit round trip (an fsync per write);
concurrent ones by client CPU. Logs go to stderr, the JSON to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from caravanserai.storage import EtcdClient, Store
from caravanserai.testing import EtcdServer

Op = Callable[[int], Awaitable[Any]]


async def rate(op: Op, count: int, *, workers: int) -> float:
    """Operations per second running `op(0..count-1)`, spread over `workers` concurrent loops."""

    async def worker(first: int) -> None:
        for i in range(first, count, workers):
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return round(count / (time.perf_counter() - started), 1)


async def raw_client(client: EtcdClient, count: int, workers: int, value: bytes) -> dict[str, float]:
    def key(i: int) -> bytes:
        return b"/bench/raw/%08d" % i

    return {
        "put_per_s": await rate(lambda i: client.put(key(i), value), count, workers=workers),
        "range_per_s": await rate(lambda i: client.range(key(i)), count, workers=workers),
    }


async def store(client: EtcdClient, count: int, workers: int, value: bytes) -> dict[str, float]:
    objects = Store(client, prefix="/bench")
    revisions: dict[int, int] = {}

    async def create(i: int) -> None:
        revisions[i] = await objects.create("projects", f"p{i:08d}", value)

    async def update(i: int) -> None:
        revisions[i] = await objects.update("projects", f"p{i:08d}", value, expected_revision=revisions[i])

    return {
        "create_per_s": await rate(create, count, workers=workers),
        "update_per_s": await rate(update, count, workers=workers),
        "get_per_s": await rate(lambda i: objects.get("projects", f"p{i:08d}"), count, workers=workers),
    }


Scenario = Callable[[EtcdClient, int, int, bytes], Awaitable[dict[str, float]]]


async def on_fresh_etcd(scenario: Scenario, count: int, workers: int, value: bytes) -> dict[str, float]:
    async with EtcdServer() as server, EtcdClient([server.endpoint]) as client:
        return await scenario(client, count, workers, value)


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    value = b"x" * opts.value_bytes
    async with EtcdServer() as server, EtcdClient([server.endpoint]) as client:
        version = (await client.status()).version
    result: dict[str, Any] = {
        "etcd_version": version,
        "value_bytes": opts.value_bytes,
        "sequential_ops": opts.sequential,
        "concurrent_ops": opts.concurrent,
        "concurrency": opts.workers,
    }
    for name, scenario in (("raw_client", raw_client), ("store", store)):
        result[name] = {
            "sequential": await on_fresh_etcd(scenario, opts.sequential, 1, value),
            f"concurrent_{opts.workers}": await on_fresh_etcd(scenario, opts.concurrent, opts.workers, value),
        }
    return result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=2000, help="operations per sequential measurement")
    parser.add_argument("--concurrent", type=int, default=6000, help="operations per concurrent measurement")
    parser.add_argument("--workers", type=int, default=64, help="concurrent loops")
    parser.add_argument("--value-bytes", type=int, default=200)
    return parser.parse_args()


if __name__ == "__main__":
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )
    print(json.dumps(asyncio.run(main(parse_args())), indent=2))
