"""N one-container projects applied at once until all are Running, next to the same N containers started with
plain concurrent `docker run -d`, and next to the same Docker work done directly (a network per project, then its
container, with the docker CLI), in the same run, on the same Docker engine. Then one project at a time (image
present), next to one `docker run -d` at a time, each cut into its hops (`agenthops`). Then the curve: `--curve`
projects at once (by default 1 and 100; 20 is the first burst), each next to as many concurrent `docker run -d`
on the default bridge and on networks made before the clock starts (Docker's own floor for one network per
project: a container on a user-defined network costs dockerd more to start, its embedded DNS included).
For every burst the control plane's CPU per project lifecycle (create → Running → delete; apiserver, agent and
scheduler processes, dockerd excluded). Prints JSON.

    .venv/bin/python bench/bench_agent.py [--count 20] [--curve 1,100] [--workers 16] [--network-pool N] [--bind-here]

The apiserver (`cara-apiserver`) and the agent (`cara-agent`) run as their own processes over a fresh etcd, as in
production, and so does `cara-scheduler`, which binds each project (with `--bind-here` the benchmark does it
itself: UpdateStatus to Scheduled, as the scheduler would). "apply → Running" is
measured per project from just before its Create to the watch event that shows it Running. The baseline starts
the same image and command with `docker run -d` CLI processes, all at once, and measures each from launch to
exit (the container is started when `docker run -d` returns). The agent does more per project than the
baseline: a network per project, labels, an image check, status reports through the API. For reference it also
times the same `docker run -d` processes on networks made (one per container) before the clock starts: what
Docker itself needs with network creation off the critical path, as the agent's network pool (`--network-pool`)
aims to keep it. The goals are judged on the first burst, which reaches the agent right after it registered (its
pool still filling); `agent_settled` is a second burst once the first one is deleted and the pool is back to its
size, as a burst reaches an agent that has run for a while. Needs the local test image (built here if missing) and
never pulls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from ipaddress import IPv4Network
from typing import Any

import agenthops
import structlog
from benchlib import cpu_per_item, free_port, goal, percentile, process_cpu, spawn, wait_until

from caravanserai import meta, v1
from caravanserai.agent.config import DEFAULT_RECONCILE_WORKERS
from caravanserai.agent.workload.netpool import default_pool_size
from caravanserai.agent.workload.subnets import first_free, host_routes
from caravanserai.client import Client
from caravanserai.testing import EtcdServer, ensure_test_image
from caravanserai.testing.builders import project

NODE = "bench-agent"
BASELINE_LABEL = "caravanserai.bench=baseline"
COMMAND = ["sleep", "3600"]
BASELINE_RANGE = IPv4Network("10.187.0.0/16")  # the baseline's own networks, beside the agent's range
CONTROL_PLANE = ["apiserver", "agent", "scheduler"]  # the processes spawned, in order (dockerd is not ours)


def summary(latencies: list[float], total: float) -> dict[str, float]:
    return {
        "total_s": round(total, 3),
        "p50_s": round(percentile(latencies, 50), 3),
        "p99_s": round(percentile(latencies, 99), 3),
        "per_container_ms": round(total / len(latencies) * 1000, 1),
    }


def docker_cli(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False).stdout.strip()


def remove_labelled(label: str) -> None:
    """Remove every container, network and volume carrying `label`."""
    ids = docker_cli("ps", "-aq", "--filter", f"label={label}").split()
    if ids:
        docker_cli("rm", "-f", "-v", *ids)
    for kind in ("network", "volume"):
        names = docker_cli(kind, "ls", "-q", "--filter", f"label={label}").split()
        if names:
            docker_cli(kind, "rm", *names)


async def docker(*args: str) -> None:
    """One docker CLI call; raises with its error output when it fails."""
    proc = await asyncio.create_subprocess_exec(
        "docker", *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"docker {args[0]} failed: {err.decode().strip()}")


def free_subnets(count: int) -> list[str]:
    """`count` /28 subnets of `BASELINE_RANGE` free of host routes and Docker networks: the baseline's networks
    get them as the agent's do (`subnets.py`), not one of Docker's scarce default ranges each."""
    ids = docker_cli("network", "ls", "-q").split()
    listed = docker_cli("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", *ids).split()
    taken = [*host_routes(), *(IPv4Network(t) for t in listed if ":" not in t)]
    chosen: list[IPv4Network] = []
    for _ in range(count):
        found = first_free(BASELINE_RANGE, 28, [*taken, *chosen])
        if found is None:
            raise RuntimeError(f"no free /28 left in {BASELINE_RANGE} for the baseline's networks")
        chosen.append(found)
    return [str(c) for c in chosen]


async def docker_run_baseline(
    image: str, count: int, *, network: bool = False, serial: bool = False, ready_networks: bool = False
) -> dict[str, float]:
    """Start `count` containers with concurrent (or `serial`) `docker run -d` processes, each after creating a
    network of its own when `network`, or on a network of its own made before the clock starts when
    `ready_networks`; time each and the whole."""

    async def one(i: int) -> float:
        started = time.perf_counter()
        where: list[str] = []
        if network:
            await docker("network", "create", "--label", BASELINE_LABEL, "--subnet", subnets[i], f"bench_baseline_{i}")
        if network:
            where = ["--network", f"bench_baseline_{i}"]
        if ready_networks:  # as the agent runs a service: on the project's network, with its name as DNS alias
            where = ["--network", f"bench_baseline_{i}", "--network-alias", "svc0"]
        await docker("run", "-d", "--name", f"bench_baseline_{i}", "--label", BASELINE_LABEL, *where, image, *COMMAND)
        return time.perf_counter() - started

    remove_labelled(BASELINE_LABEL)
    subnets = free_subnets(count) if network or ready_networks else []
    if ready_networks:
        for i in range(count):
            await docker("network", "create", "--label", BASELINE_LABEL, "--subnet", subnets[i], f"bench_baseline_{i}")
    started = time.perf_counter()
    if serial:
        latencies = [await one(i) for i in range(count)]
    else:
        latencies = list(await asyncio.gather(*(one(i) for i in range(count))))
    total = time.perf_counter() - started
    remove_labelled(BASELINE_LABEL)
    return summary(latencies, total)


async def bind(client: Client, name: str) -> None:
    """Bind project `name` to the agent's node as a scheduler would (UpdateStatus to Scheduled)."""
    current = meta.copy(await client.projects.get(name))
    current.status.node_ref = NODE
    message = f"bound to {NODE} by the benchmark"
    meta.set_phase(current, v1.SCHEDULED, reason="Scheduled", message=message, now=time.time())
    await client.projects.update_status(current)


async def watch_running(client: Client, names: set[str], since: str, running_at: dict[str, float]) -> None:
    """Record the time each project is first seen Running, until all are."""
    async for event in client.projects.watch(resource_version=since):
        name = event.object.metadata.name
        if name in names and name not in running_at and event.object.status.phase == v1.RUNNING:
            running_at[name] = time.perf_counter()
            if len(running_at) == len(names):
                return
        if event.object.status.phase == v1.FAILED and name in names:
            raise RuntimeError(f"project {name} failed: {list(event.object.status.conditions)}")


async def agent_run(
    client: Client, image: str, count: int, *, bind_here: bool, prefix: str = "bench"
) -> dict[str, Any]:
    """Apply `count` projects at once and time apply → Running; then delete them and time the teardown."""
    names = {f"{prefix}-{i:03d}" for i in range(count)}
    running_at: dict[str, float] = {}
    applied_at: dict[str, float] = {}
    since = (await client.projects.list(limit=1)).resource_version
    watcher = asyncio.create_task(watch_running(client, names, since, running_at))

    async def apply(name: str) -> None:
        applied_at[name] = time.perf_counter()
        await client.projects.create(project(name, image=image, command=COMMAND))
        if bind_here:
            await bind(client, name)

    started = time.perf_counter()
    await asyncio.gather(*(apply(n) for n in sorted(names)))
    await asyncio.wait_for(watcher, timeout=300)
    total = max(running_at.values()) - started
    result: dict[str, Any] = summary([running_at[n] - applied_at[n] for n in names], total)

    teardown_started = time.perf_counter()
    await asyncio.gather(*(client.projects.delete(n) for n in names))

    async def all_terminated() -> bool:
        listed = await client.projects.list()
        return all(p.status.phase == v1.TERMINATED for p in listed.items if p.metadata.name in names)

    await wait_until(all_terminated, "teardown", timeout=300)
    result["teardown_total_s"] = round(time.perf_counter() - teardown_started, 3)
    return result


async def pool_settled(size: int) -> bool:
    """Whether the agent's network pool holds exactly `size` networks (all spare: no project runs)."""
    listed = docker_cli("network", "ls", "-q", "--filter", f"label=caravanserai.io/node={NODE}",
                        "--filter", "label=caravanserai.io/network-pool=true").split()  # fmt: skip
    return len(listed) == size


async def agent_serial(client: Client, image: str, count: int, *, bind_here: bool) -> dict[str, Any]:
    """`count` projects applied one after another, each once the previous one is Running and gone: apply →
    Running and its hops (`agenthops`)."""

    async def gone(name: str) -> None:
        async def terminated() -> bool:
            return (await client.projects.get(name)).status.phase == v1.TERMINATED

        await wait_until(terminated, f"{name} terminated", timeout=120)

    measured = await agenthops.one_by_one(
        client, image, count, node=NODE, command=COMMAND, bind=bind if bind_here else None, until_gone=gone
    )
    latencies = measured.pop("apply_to_running_s")
    return {**summary(latencies, sum(latencies)), **measured}


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    image = await asyncio.to_thread(ensure_test_image)
    baseline = await docker_run_baseline(image, opts.count)
    direct = await docker_run_baseline(image, opts.count, network=True)
    ready = await docker_run_baseline(image, opts.count, ready_networks=True)
    async with agenthops.DockerEvents(BASELINE_LABEL) as events:
        raw_single = await docker_run_baseline(image, opts.single, serial=True)
    raw_single["create_to_start_p50_ms"] = events.create_to_start_p50_ms()
    curve: dict[int, dict[str, Any]] = {
        count: {
            "docker_run": await docker_run_baseline(image, count),
            "docker_run_on_networks_made_before": await docker_run_baseline(image, count, ready_networks=True),
        }
        for count in opts.curve
    }
    logs = tempfile.mkdtemp(prefix="bench-agent-")
    procs: list[subprocess.Popen[bytes]] = []
    use_scheduler = not opts.bind_here and shutil.which("cara-scheduler", path=os.path.dirname(sys.executable))
    try:
        async with EtcdServer() as etcd:
            address = f"127.0.0.1:{free_port()}"
            procs.append(
                spawn(
                    [
                        "cara-apiserver",
                        "--etcd-endpoints",
                        etcd.endpoint,
                        "--listen",
                        address,
                        "--metrics-listen",
                        "off",
                        "--log-level",
                        "warning",
                    ],
                    f"{logs}/apiserver.log",
                )
            )
            procs.append(
                spawn(
                    [
                        "cara-agent",
                        "--server",
                        address,
                        "--node-name",
                        NODE,
                        "--listen",
                        "127.0.0.1:0",
                        "--health-listen",
                        "127.0.0.1:0",
                        "--ingress-listen",
                        "127.0.0.1:0",
                        "--workers",
                        str(opts.workers),
                        "--stop-timeout",
                        "1",
                        "--log-level",
                        "warning",
                        *([] if opts.network_pool is None else ["--network-pool", str(opts.network_pool)]),
                    ],
                    f"{logs}/agent.log",
                )
            )
            if use_scheduler:
                procs.append(spawn(["cara-scheduler", "--server", address], f"{logs}/scheduler.log"))
            async with Client(address, retry_timeout=5) as client:

                async def node_ready() -> bool:
                    return (await client.nodes.get(NODE)).status.state == v1.NODE_READY

                await wait_until(node_ready, "agent registration")
                cpu_before = [process_cpu(p.pid) for p in procs]
                agent = await agent_run(client, image, opts.count, bind_here=not use_scheduler)
                lifecycle = cpu_per_item(CONTROL_PLANE, procs, cpu_before, opts.count)
                pool = default_pool_size(os.cpu_count() or 1) if opts.network_pool is None else opts.network_pool
                await wait_until(lambda: pool_settled(pool), "the agent's network pool to settle", timeout=120)
                settled = await agent_run(client, image, opts.count, bind_here=not use_scheduler, prefix="again")
                await wait_until(lambda: pool_settled(pool), "the agent's network pool to settle", timeout=120)
                single = await agent_serial(client, image, opts.single, bind_here=not use_scheduler)
                for count in opts.curve:  # the curve's other points (the first burst is its point at --count)
                    await wait_until(lambda: pool_settled(pool), "the agent's network pool to settle", timeout=120)
                    cpu_before = [process_cpu(p.pid) for p in procs]
                    run = await agent_run(client, image, count, bind_here=not use_scheduler, prefix=f"curve{count}")
                    curve[count] |= {
                        "agent": run,
                        "lifecycle_cpu_ms": cpu_per_item(CONTROL_PLANE, procs, cpu_before, count),
                    }
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        remove_labelled(f"caravanserai.io/node={NODE}")
        shutil.rmtree(logs, ignore_errors=True)
    curve[opts.count] = {
        "docker_run": baseline,
        "docker_run_on_networks_made_before": ready,
        "agent": agent,
        "lifecycle_cpu_ms": lifecycle,
    }
    for point in curve.values():
        agent_s, floor = point["agent"]["total_s"], point["docker_run_on_networks_made_before"]["total_s"]
        point["ratio_agent_to_docker_run"] = round(agent_s / point["docker_run"]["total_s"], 3)
        point["ratio_agent_to_docker_run_on_networks_made_before"] = round(agent_s / floor, 3)
    return {
        "benchmark": "agent_apply_to_running_vs_docker_run",
        "curve_projects_at_once": dict(sorted(curve.items())),
        "control_plane_cpu_ms_per_project_lifecycle": lifecycle,
        "count": opts.count,
        "agent_workers": opts.workers,
        "agent_network_pool": "cara-agent's default" if opts.network_pool is None else opts.network_pool,
        "binding": "cara-scheduler" if use_scheduler else "benchmark (UpdateStatus Scheduled)",
        "cpus": os.cpu_count(),
        "agent": agent,
        "agent_settled": settled,
        "ratio_agent_settled_to_docker_run": round(settled["total_s"] / baseline["total_s"], 3),
        "docker_run": baseline,
        "docker_network_and_run": direct,
        "docker_run_on_networks_made_before": ready,
        "ratio_agent_to_docker_run_on_networks_made_before": round(agent["total_s"] / ready["total_s"], 3),
        "ratio_agent_to_docker_run": round(agent["total_s"] / baseline["total_s"], 3),
        "ratio_agent_to_docker_network_and_run": round(agent["total_s"] / direct["total_s"], 3),
        "single": {
            "agent": single,
            "docker_run": raw_single,
            "p50_above_docker_run_ms": round((single["p50_s"] - raw_single["p50_s"]) * 1000),
        },
        "goals": [
            goal(
                f"end to end: {opts.count} projects apply -> Running / {opts.count} concurrent docker run",
                round(agent["total_s"] / baseline["total_s"], 3),
                1.2,
                at_most=True,
            ),
            goal(
                "end to end: the same / the same Docker work done directly (network + container each)",
                round(agent["total_s"] / direct["total_s"], 3),
                1.05,
                at_most=True,
            ),
            *(
                goal(
                    f"end to end: {n} projects at once apply -> Running / {n} concurrent docker run",
                    c["ratio_agent_to_docker_run"],
                    1.2,
                    at_most=True,
                )
                for n, c in sorted(curve.items())
                if n != opts.count
            ),
            goal(
                f"control plane CPU per project lifecycle, create -> Running -> delete, {opts.count} at once (ms)",
                lifecycle["total"],
                60,
                at_most=True,
            ),
            goal(
                "end to end: one project apply -> Running, p50 above docker run (ms)",
                round((single["p50_s"] - raw_single["p50_s"]) * 1000),
                50,
                at_most=True,
            ),
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument(
        "--curve",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[1, 100],
        help="further numbers of projects applied at once, each next to as many concurrent docker run",
    )
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="cara-agent's --workers (default: its default)"
    )
    parser.add_argument("--single", type=int, default=5, help="projects applied one at a time")
    parser.add_argument(
        "--network-pool",
        type=int,
        default=None,
        help="cara-agent's --network-pool (default: not given, the agent's default)",
    )
    parser.add_argument(
        "--bind-here",
        action="store_true",
        help="the benchmark binds each project (UpdateStatus Scheduled) instead of a cara-scheduler process",
    )
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
