"""Node death: two real agents on the local Docker engine; the one running every project is killed (SIGKILL);
time until all its projects are Running on the other. Prints JSON.

    .venv/bin/python bench/bench_failover.py [--projects 10] [--heartbeat-timeout 5] [--grace-period 5]

Real and separate processes over a fresh etcd: `cara-apiserver`, `cara-controller-manager` (scheduler, node
health, gc, placement; no leader election) with the short `--heartbeat-timeout`/`--grace-period` given, and two
`cara-agent`s (heartbeat every second, random node names, loopback listeners). The first agent starts alone so
the scheduler places every project on it; the second joins once they are all Running. The killed agent's
containers keep running on the shared engine (its host "died" only as far as the cluster can tell); the
benchmark removes them at the end, with everything else it labelled. The goal: all Running elsewhere within
heartbeat timeout + grace period + 3 s of the kill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import structlog
from benchlib import free_port, goal, start_apiserver, stop, wait_serving

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.testing import EtcdServer, ensure_test_image
from caravanserai.testing.builders import project

COMMAND = ["sleep", "3600"]


def remove_node_containers(node: str) -> None:
    """Remove every container and network the agent of `node` made (by its node label)."""
    label = f"label=caravanserai.io/node={node}"
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", label], capture_output=True, text=True).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-f", "-v", *ids], capture_output=True, check=False)
    nets = subprocess.run(["docker", "network", "ls", "-q", "--filter", label], capture_output=True, text=True)
    if nets.stdout.split():
        subprocess.run(["docker", "network", "rm", *nets.stdout.split()], capture_output=True, check=False)


def python(module: str, *args: str, log: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.DEVNULL, stderr=out)


def agent(address: str, node: str, fence_after: float, log: str) -> subprocess.Popen[bytes]:
    return python(
        "caravanserai.agent", "--server", address, "--node-name", node, "--heartbeat-interval", "1",
        "--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--ingress-listen", "127.0.0.1:0",
        "--stop-timeout", "1", "--fence-after", f"{fence_after:g}s", "--log-level", "warning",
        log=log,
    )  # fmt: skip


async def until(check: Any, what: str, timeout: float, interval: float = 0.05) -> float:
    """Poll `check()` until true; the monotonic time it first held. TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await check():
                return time.monotonic()
        except Exception:  # noqa: BLE001 - not there yet
            pass
        await asyncio.sleep(interval)
    raise TimeoutError(f"{what} within {timeout:g}s")


async def placed(client: Client, names: list[str], node: str) -> bool:
    listed = {p.metadata.name: p for p in (await client.projects.list()).items}
    return all(
        n in listed and listed[n].status.phase == v1.RUNNING and listed[n].status.node_ref == node for n in names
    )


async def node_ready(client: Client, node: str) -> bool:
    return bool((await client.nodes.get(node)).status.state == v1.NODE_READY)


async def event_stages(client: Client, since: float) -> dict[str, list[float]]:
    """Where the time went: for each event reason recorded after `since` (wall clock), the first and the last
    time after it, in seconds (NodeNotReady, evictions, Scheduled, container starts …)."""
    stages: dict[str, list[float]] = {}
    for event in (await client.events.list()).items:
        at = event.spec.last_timestamp.seconds + event.spec.last_timestamp.nanos / 1e9 - since
        if at < 0:
            continue
        first_last = stages.setdefault(event.spec.reason, [at, at])
        first_last[0], first_last[1] = min(first_last[0], at), max(first_last[1], at)
    return {reason: [round(t, 2) for t in times] for reason, times in sorted(stages.items(), key=lambda kv: kv[1][0])}


async def scenario(opts: argparse.Namespace, image: str, logs: str, nodes: tuple[str, str]) -> dict[str, Any]:
    victim_node, survivor_node = nodes
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with EtcdServer() as etcd:
            address = f"127.0.0.1:{free_port()}"
            procs.append(start_apiserver(etcd.endpoint, address, "/bench-failover", "--bookmark-interval", "1"))
            await wait_serving(address, procs[0])
            procs.append(python(
                "caravanserai.controllers.manager", "--server", address, "--no-leader-elect",
                "--heartbeat-timeout", f"{opts.heartbeat_timeout:g}s", "--grace-period", f"{opts.grace_period:g}s",
                "--startup-grace-period", "1s", "--terminated-delay", "1s", "--metrics-port", "-1",
                "--log-level", "warning", log=f"{logs}/controllers.log",
            ))  # fmt: skip
            fence = opts.heartbeat_timeout + opts.grace_period
            victim = agent(address, victim_node, fence, f"{logs}/victim.log")
            procs.append(victim)
            async with Client(address, timeout=10, retry_timeout=10) as client:
                await until(lambda: node_ready(client, victim_node), "first agent Ready", 60)
                names = [f"fo-{i:02d}" for i in range(opts.projects)]
                for name in names:
                    await client.projects.create(project(name, image=image, command=COMMAND))
                await until(lambda: placed(client, names, victim_node), "projects Running on the first agent", 120)
                procs.append(agent(address, survivor_node, fence, f"{logs}/survivor.log"))
                await until(lambda: node_ready(client, survivor_node), "second agent Ready", 60)
                victim.send_signal(signal.SIGKILL)
                killed, killed_wall = time.monotonic(), time.time()
                budget = opts.heartbeat_timeout + opts.grace_period + 3.0
                done = await until(lambda: placed(client, names, survivor_node), "Running elsewhere", budget + 60)
                stages = await event_stages(client, killed_wall)
        return {"running_elsewhere_after_s": round(done - killed, 2), "budget_s": budget, "events_after_kill_s": stages}
    finally:
        for proc in reversed(procs):
            stop(proc)


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    image = await asyncio.to_thread(ensure_test_image)
    suffix = secrets.token_hex(3)
    nodes = (f"bench-fo-a-{suffix}", f"bench-fo-b-{suffix}")
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as logs:
        try:
            result = await scenario(opts, image, logs, nodes)
        except Exception:
            for log in sorted(os.listdir(logs)):
                with open(os.path.join(logs, log), errors="replace") as f:
                    print(f"--- {log}:", *f.readlines()[-40:], sep="", file=sys.stderr)
            raise
        finally:
            for node in nodes:
                await asyncio.to_thread(remove_node_containers, node)
    return {
        "benchmark": "failover",
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "projects": opts.projects,
        "heartbeat_timeout_s": opts.heartbeat_timeout,
        "grace_period_s": opts.grace_period,
        **result,
        "goals": [
            goal(
                f"failover: {opts.projects} projects Running on the other agent after SIGKILL (s)",
                result["running_elsewhere_after_s"],
                result["budget_s"],
                at_most=True,
            ),
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=10)
    parser.add_argument("--heartbeat-timeout", type=float, default=5.0)
    parser.add_argument("--grace-period", type=float, default=5.0)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
