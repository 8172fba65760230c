"""Quota accounting's cost and the queue's speed, against a real etcd and a `cara-apiserver` process.

1. **Write rate with quota accounting on ÷ off**: project creates (64 concurrent clients) into a namespace whose
   ResourceQuota counts them (limits never reached), against creates into a namespace without a quota, rounds
   interleaved; each side's best round (goal ≥ 0.9).
2. **Admission throughput**: 100 namespaces in 10 cohorts (each namespace's quota names its cohort: every
   admission is judged against the cohort's total and guarded on the versions of all ten member quotas), each
   quota holding back 100 queued projects (10,000 in all); the quotas are raised at once and the queue controller
   (in this process, one pass per cohort) admits them; admissions per second from the raise until the last is
   Pending (goal ≥ 300/s). `--cohorts 0` measures namespaces that queue independently.

    .venv/bin/python bench/bench_quota.py [--count 2000] [--namespaces 100] [--cohorts 10] [--queued 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from typing import Any

import structlog
from benchlib import goal, start_apiserver, stop, wait_serving

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.queue import app as queue_app
from caravanserai.errors import Conflict
from caravanserai.testing import free_port
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.manager import running

CLIENTS = 64
WORKERS = 10
"""Queue workers: one per cohort (a cohort's pass admits one project after another)."""


def _quota(namespace: str, projects: int, cohort: str = "") -> v1.ResourceQuota:
    q = v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=namespace))
    q.spec.hard.update({"cpu": "100000", "memory": "100Ti", "projects": str(projects)})
    q.spec.cohort = cohort
    return q


def _in(namespace: str, name: str) -> v1.Project:
    p = project(name, requests={"cpu": "10m", "memory": "8Mi"})
    p.metadata.namespace = namespace
    return p


async def create_rate(clients: list[Client], namespace: str, first: int, count: int) -> float:
    """Creates per second of `count` projects into `namespace` over `CLIENTS` concurrent loops."""

    async def worker(w: int) -> None:
        for i in range(w, count, CLIENTS):
            await clients[i % len(clients)].projects.create(_in(namespace, f"p{first + i:06d}"))

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(CLIENTS)))
    return round(count / (time.perf_counter() - started), 1)


async def write_ratio(address: str, count: int, rounds: int) -> dict[str, Any]:
    clients = [Client(address, own_connection=True) for _ in range(4)]
    try:
        admin = clients[0]
        for name in ("plain", "counted"):
            await admin.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=name)))
        await admin.resource(v1.ResourceQuota).create(_quota("counted", 10 * count * rounds))
        plain, counted = [], []
        for n in range(rounds):
            plain.append(await create_rate(clients, "plain", n * count, count))
            counted.append(await create_rate(clients, "counted", n * count, count))
        used = (await admin.resource(v1.ResourceQuota).get("counted/team")).status.used["projects"]
        return {"off_per_s": plain, "on_per_s": counted, "counted_projects": used}
    finally:
        for client in clients:
            await client.close()


async def raise_limit(client: Client, namespace: str, projects: int) -> None:
    """Raise the namespace's project limit as a user would: read, change, write; again on Conflict (the queue
    controller writes the quota's status meanwhile)."""
    quotas = client.resource(v1.ResourceQuota)
    while True:
        q = await quotas.get(f"{namespace}/team")
        q.spec.hard["projects"] = str(projects)
        try:
            await quotas.update(q)
            return
        except Conflict:
            continue


def cohort_of(index: int, namespaces: int, cohorts: int) -> str:
    """The cohort of the `index`-th namespace: consecutive namespaces share one ("" without cohorts)."""
    return f"cohort-{index * cohorts // namespaces:02d}" if cohorts else ""


async def admission_rate(address: str, namespaces: int, cohorts: int, queued: int) -> dict[str, Any]:
    clients = [Client(address, own_connection=True) for _ in range(4)]
    admin = clients[0]
    try:
        names = [f"team-{i:03d}" for i in range(namespaces)]
        for index, name in enumerate(names):
            await admin.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=name)))
            await admin.resource(v1.ResourceQuota).create(_quota(name, 0, cohort_of(index, namespaces, cohorts)))

        async def fill(w: int) -> None:
            for i in range(w, namespaces * queued, CLIENTS):
                created = await clients[i % 4].projects.create(_in(names[i % namespaces], f"q{i:06d}"))
                assert created.status.phase == v1.QUEUED

        await asyncio.gather(*(fill(w) for w in range(CLIENTS)))
        manager = Manager(admin, clock=SystemClock())
        queue_app.setup(manager, admin, SystemClock(), queue_app.QueueOptions(reconcile_workers=WORKERS))
        async with running(manager):
            await manager.informers.wait_synced()
            started = time.perf_counter()
            for name in names:
                await raise_limit(admin, name, queued)
            total = namespaces * queued
            while True:
                # Admitted = counted by the quotas (in the same transaction as each admission); reading 100 quotas
                # keeps the poll light (a list of every project would load the apiserver being measured, and count
                # the Pending projects the write-rate phase left too).
                pending = sum(
                    int(q.status.used.get("projects", "0"))
                    for q in await admin.resource(v1.ResourceQuota).list()
                    if q.metadata.namespace.startswith("team-")
                )
                if pending >= total:
                    break
                if time.perf_counter() - started > 600:
                    raise TimeoutError(f"{pending} of {total} admitted in 600 s")
                await asyncio.sleep(0.5)
            seconds = time.perf_counter() - started
        return {
            "namespaces": namespaces,
            "cohorts": cohorts,
            "queue_workers": WORKERS,
            "queued": total,
            "seconds": round(seconds, 2),
            "per_s": round(total / seconds, 1),
        }
    finally:
        for client in clients:
            await client.close()


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    async with EtcdServer() as etcd:
        address = f"127.0.0.1:{free_port()}"
        proc = start_apiserver(etcd.endpoint, address, "/bench-quota")
        try:
            await wait_serving(address, proc)
            writes = await write_ratio(address, opts.count, opts.rounds)
            admissions = await admission_rate(address, opts.namespaces, opts.cohorts, opts.queued)
        finally:
            stop(proc)
    ratio = round(max(writes["on_per_s"]) / max(writes["off_per_s"]), 3)
    return {
        "benchmark": "quota",
        "cpus": os.cpu_count(),
        "writes": writes,
        "ratio_on_to_off": ratio,
        "admissions": admissions,
        "goals": [
            goal("project creates with quota accounting on ÷ off", ratio, 0.9, at_most=False),
            goal(
                f"admissions/s, {opts.namespaces} namespaces in {opts.cohorts} cohorts, "
                f"{opts.namespaces * opts.queued} queued",
                admissions["per_s"],
                300,
                at_most=False,
                unit="/s",
            ),
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--cohorts", type=int, default=10, help="0: namespaces queue independently")
    parser.add_argument("--queued", type=int, default=100)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
