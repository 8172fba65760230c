"""A rolling update of a 10-replica ProjectSet (maxSurge 2, maxUnavailable 0) next to the same update done by hand
with the docker CLI, on the same Docker engine, in the same run. Prints JSON.

    .venv/bin/python bench/bench_rollout.py [--replicas 10] [--surge 2]

The cluster runs as in production, each part its own process over a fresh etcd: `cara-apiserver`, one
`cara-agent` and `cara-controller-manager` (every controller, the garbage collector included). The set is created
and left to settle (every replica available); the clock then runs from the write of the changed template to the
status that says every replica is of the new revision and available (`rollout status`' end). By hand: the same number of
containers of the old command run; then, `surge` at a time, `docker run -d` the new ones (it returns once they
started), then `docker stop -t 1` as many old ones (the agent stops with the same one-second timeout). The ratio
of the two is the figure. Needs the local test image (built here if missing) and never pulls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import tempfile
import time
from typing import Any

from bench_agent import docker, remove_labelled, spawn, wait_until
from benchlib import free_port, goal

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.project.replicas import template_hash
from caravanserai.testing import EtcdServer, ensure_test_image

NODE = "bench-rollout"
MANUAL_LABEL = "caravanserai.bench=rollout-by-hand"
TARGET_RATIO = 2.0


def the_set(image: str, replicas: int, surge: int) -> v1.ProjectSet:
    obj = v1.ProjectSet()
    obj.metadata.name = "bench"
    obj.spec.replicas = replicas
    obj.spec.selector.match_labels["app"] = "bench"
    obj.spec.template.labels["app"] = "bench"
    obj.spec.template.spec.services.add(name="main", image=image, command=["sleep", "3600"])
    obj.spec.strategy.rolling_update.max_surge = str(surge)
    obj.spec.strategy.rolling_update.max_unavailable = "0"
    return obj


async def settled(client: Client, revision: str, replicas: int) -> bool:
    s = (await client.projectsets.get("bench")).status
    return s.update_revision == s.current_revision == revision and s.replicas == s.available_replicas == replicas


async def by_hand(image: str, replicas: int, surge: int) -> float:
    """Seconds to replace `replicas` running containers, `surge` at a time, with the docker CLI."""
    old = [f"bench-old-{i}" for i in range(replicas)]
    await asyncio.gather(
        *(docker("run", "-d", "--name", n, "--label", MANUAL_LABEL, image, "sleep", "3600") for n in old)
    )
    started = time.perf_counter()
    for at in range(0, replicas, surge):
        batch = range(at, min(replicas, at + surge))
        await asyncio.gather(
            *(docker("run", "-d", "--name", f"bench-new-{i}", "--label", MANUAL_LABEL, image, "sleep", "7200")
              for i in batch)
        )  # fmt: skip
        await asyncio.gather(*(docker("stop", "-t", "1", old[i]) for i in batch))
    elapsed = time.perf_counter() - started
    remove_labelled(MANUAL_LABEL)
    return elapsed


def start(address: str, etcd: str, logs: str) -> list[subprocess.Popen[bytes]]:
    common = ["--log-level", "warning"]
    return [
        spawn(["cara-apiserver", "--etcd-endpoints", etcd, "--listen", address, "--metrics-listen", "off", *common],
              f"{logs}/apiserver.log"),
        spawn(["cara-agent", "--server", address, "--node-name", NODE, "--listen", "127.0.0.1:0", "--health-listen",
               "127.0.0.1:0", "--ingress-listen", "127.0.0.1:0", "--stop-timeout", "1", *common], f"{logs}/agent.log"),
        spawn(["cara-controller-manager", "--server", address, "--no-leader-elect", "--metrics-port", "0", *common],
              f"{logs}/controllers.log"),
    ]  # fmt: skip


async def rolling(address: str, image: str, replicas: int, surge: int, opts_timeout: float = 300) -> float:
    """Seconds from the template change to a complete rollout."""
    async with Client(address, retry_timeout=5) as client:

        async def node_ready() -> bool:
            return (await client.nodes.get(NODE)).status.state == v1.NODE_READY

        await wait_until(node_ready, "agent registration")
        created = await client.projectsets.create(the_set(image, replicas, surge))
        first = template_hash(created.spec.template)
        await wait_until(lambda: settled(client, first, replicas), "the set to settle", timeout=180)

        def change(obj: v1.ProjectSet) -> bool:
            obj.spec.template.spec.services[0].command[:] = ["sleep", "7200"]
            return True

        started = time.perf_counter()
        updated, _ = await modify(client.projectsets, "bench", change)
        second = template_hash(updated.spec.template)
        try:
            await wait_until(lambda: settled(client, second, replicas), "the rollout", timeout=opts_timeout)
        except TimeoutError:
            status = (await client.projectsets.get("bench")).status
            phases = sorted(f"{p.metadata.name}:{p.status.phase}" for p in (await client.projects.list()).items)
            raise TimeoutError(f"the rollout did not end: {status} {phases}") from None
        elapsed = time.perf_counter() - started
        await client.projectsets.delete("bench")
        return elapsed


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    image = await asyncio.to_thread(ensure_test_image)
    manual = await by_hand(image, opts.replicas, opts.surge)
    logs = tempfile.mkdtemp(prefix="bench-rollout-")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with EtcdServer() as etcd:
            address = f"127.0.0.1:{free_port()}"
            procs = start(address, etcd.endpoint, logs)
            rollout = await rolling(address, image, opts.replicas, opts.surge)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        remove_labelled(f"caravanserai.io/node={NODE}")
        remove_labelled(MANUAL_LABEL)
        shutil.rmtree(logs, ignore_errors=True)
    ratio = round(rollout / manual, 3)
    return {
        "benchmark": "projectset_rolling_update_vs_docker_by_hand",
        "replicas": opts.replicas,
        "max_surge": opts.surge,
        "rollout_s": round(rollout, 3),
        "by_hand_s": round(manual, 3),
        "ratio_rollout_to_by_hand": ratio,
        "goals": [
            goal(
                f"rolling update of {opts.replicas} replicas (maxSurge {opts.surge}) / the same by hand with docker",
                ratio,
                TARGET_RATIO,
                at_most=True,
            )
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--surge", type=int, default=2)
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
