"""The autoscaler's two goals of the node-autoscaling issue.

* **Decision time**: one pass of the reconciler (snapshot of the cluster view, bookkeeping of every group, the scale-up
  simulation with the scheduler's filters, the expander, the scale-down checks) over 5,000 nodes in 50 groups and
  1,000 Pending unschedulable projects (plus 10,000 bound ones). In process, over an in-memory client (the
  project's `FakeClient`) and a provider that records calls, so the figure is the decision's own cost. Target:
  p99 ≤ 1 s per pass.
* **Time to ask**: from a project's creation (it turns unschedulable) to the provider being asked for a node,
  with the default settings (`AutoscalerConfig()`), over a real etcd, an in-process apiserver and in-process
  scheduler and autoscaler. Target: ≤ 10 s.

    .venv/bin/python bench/bench_autoscaler.py [--passes 20] [--samples 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchlib import goal, percentile

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, timestamp
from caravanserai.controller import EventRecorder, Manager
from caravanserai.controllers.autoscaler import app as autoscaler_app
from caravanserai.controllers.autoscaler.providers import ProviderNode, Providers
from caravanserai.controllers.autoscaler.reconciler import KEY, AutoscalerReconciler
from caravanserai.controllers.autoscaler.view import ClusterView
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.process.logging import configure_logging
from caravanserai.project.lifecycle import REASON_UNSCHEDULABLE
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.builders import lease, node, node_status, project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.fakeclient import FakeClient
from caravanserai.testing.manager import running


class Recording(Providers):
    def __init__(self) -> None:
        super().__init__()
        self.asked: dict[str, float] = {}

    def of(self, group: v1.NodeGroup) -> Recording:  # type: ignore[override]  # the recorder is its own provider
        return self

    async def increase(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        self.asked.setdefault(group.metadata.name, time.monotonic())

    async def delete(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        return None

    async def list(self, group: v1.NodeGroup) -> list[ProviderNode] | None:
        return None


class ListCache:
    """A read-only cache over a list (what the reconciler reads of an informer)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = {i.metadata.name: i for i in items}

    def get(self, name: str) -> Any:
        return self.items.get(name)

    def list(self) -> list[Any]:
        return list(self.items.values())


def group(name: str, cpu: int) -> v1.NodeGroup:
    g = meta.with_type_meta(v1.NodeGroup())
    g.metadata.name = name
    g.spec.max_size = 1000
    g.spec.template.allocatable.update({"cpu": str(cpu), "memory": f"{cpu * 2}Gi"})
    g.spec.template.labels["pool"] = name
    g.spec.provider.exec.create.append("true")
    g.spec.provider.exec.delete.append("true")
    return g


def cluster(now: float) -> tuple[list[v1.NodeGroup], list[v1.Node], list[v1.Lease], list[v1.Project]]:
    rng = random.Random(7)
    groups = [group(f"g{i:02d}", cpu=4 + (i % 5) * 4) for i in range(50)]
    nodes, leases, projects = [], [], []
    for i in range(5000):
        g = groups[i % 50]
        n = node(f"n{i:04d}", labels={v1.LABEL_NODE_GROUP: g.metadata.name, "pool": g.metadata.name})
        node_status(n, cpu=g.spec.template.allocatable["cpu"], memory=g.spec.template.allocatable["memory"])
        n.metadata.creation_timestamp.CopyFrom(timestamp(now - 3600))
        n.metadata.resource_version = str(100000 + i)
        nodes.append(n)
        held = lease(n.metadata.name)
        held.spec.renew_time.CopyFrom(timestamp(now))
        leases.append(held)
    for i in range(10000):
        p = project(f"bound{i:05d}", requests={"cpu": "1", "memory": "1Gi"})
        p.status.phase, p.status.node_ref = v1.RUNNING, f"n{i % 5000:04d}"
        p.metadata.resource_version = str(i + 1)
        projects.append(p)
    for i in range(1000):
        p = project(f"pending{i:04d}", requests={"cpu": str(rng.choice((1, 2, 3, 6))), "memory": "2Gi"})
        if i % 10 == 0:
            p.spec.node_selector["pool"] = f"g{rng.randrange(50):02d}"
        p.status.phase = v1.PENDING
        p.metadata.resource_version = str(20000 + i)
        meta.set_condition(p.status.conditions, v1.CONDITION_SCHEDULED, v1.FALSE, reason=REASON_UNSCHEDULABLE, now=now)
        projects.append(p)
    return groups, nodes, leases, projects


async def decision_time(passes: int) -> dict[str, Any]:
    clock = SystemClock()
    client = FakeClient(clock=clock)
    groups, nodes, leases, projects = cluster(clock.now())
    for g in groups:
        await client.nodegroups.create(g)
    group_cache = ListCache([await client.nodegroups.get(g.metadata.name) for g in groups])
    view = ClusterView()
    view.load(nodes, leases, projects)  # what the informers' first lists deliver; nothing changes between passes
    recorder = EventRecorder(client, component="bench", clock=clock)  # type: ignore[arg-type]  # the in-memory client
    reconciler = AutoscalerReconciler(client, group_cache, view, recorder, clock=clock, providers=Recording())  # type: ignore[arg-type]  # the in-memory client and a list-backed cache
    seconds, cpu = [], []
    for _ in range(passes):
        started, used = time.perf_counter(), time.process_time()
        await reconciler.reconcile(KEY)
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
        group_cache.items = {g.metadata.name: g for g in (await client.nodegroups.list()).items}
    return {
        "passes": passes,
        "p50_s": percentile(seconds, 50),
        "p99_s": percentile(seconds, 99),
        "max_s": max(seconds),
        "cpu_p50_s": percentile(cpu, 50),  # CPU time of the process: on a shared machine, what the pass itself cost
        "cpu_p99_s": percentile(cpu, 99),
        "load_average": os.getloadavg()[0],
    }


async def time_to_ask(samples: int) -> dict[str, Any]:
    provider = Recording()
    clock = SystemClock()
    async with EtcdServer() as etcd, apiserver(etcd.endpoint) as api, Client(api.address, timeout=10) as client:
        small = await client.nodes.create(node("small"))
        node_status(small, cpu="1", memory="1Gi")
        await client.nodes.update_status(small)
        manager = Manager(client, clock=clock, shutdown_timeout=5.0)
        scheduler_app.setup(manager, client, clock)
        parts = autoscaler_app.setup(manager, client, clock)  # default settings
        for step in (parts.reconciler._book, parts.reconciler._up, parts.reconciler._down):  # noqa: SLF001  # the benchmark's recording provider
            object.__setattr__(step, "providers", provider)
        async with running(manager):
            waits = []
            for i in range(samples):
                name = f"s{i}"
                await client.nodegroups.create(group(name, cpu=8))
                created = time.monotonic()
                await client.projects.create(project(f"p{i}", requests={"cpu": "2"}, node_selector={"pool": name}))
                while name not in provider.asked and time.monotonic() - created < 60:
                    await asyncio.sleep(0.05)
                waits.append(provider.asked.get(name, float("inf")) - created)
    return {"samples": samples, "seconds": waits, "max_s": max(waits)}


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    decision = await decision_time(opts.passes)
    ask = await time_to_ask(opts.samples)
    return {
        "decision": decision,
        "time_to_ask": ask,
        "goals": [
            goal(
                "autoscaler: decision p99 (5,000 nodes, 50 groups, 1,000 Pending)",
                decision["p99_s"],
                1.0,
                at_most=True,
                unit=" s",
            ),
            goal(
                "autoscaler: unschedulable → provider asked (default settings)",
                ask["max_s"],
                10.0,
                at_most=True,
                unit=" s",
            ),
        ],
    }


if __name__ == "__main__":
    configure_logging("error")  # structured logs to stderr: stdout carries the JSON only
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--samples", type=int, default=5)
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
    sys.exit(0)
