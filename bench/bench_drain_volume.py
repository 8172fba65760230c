"""Drain of a project with a 1 GiB backed-up volume: time from `caractrl drain` to Running on the other node, split
into stop, final backup, hand-over, restore and start, next to copying the same bytes with `tar` (the floor: what
moving the data between two directories of one disk costs without restic, a repository or an orchestrator).

    .venv/bin/python bench/bench_drain_volume.py [--size-mib 1024]

Real parts only, on loopback: etcd, `cara-apiserver`, `cara-controller-manager` and two `cara-agent` processes on
the local Docker Engine, restic and a REST repository served by `rclone serve restic`. The bench writes the
volume's data straight into node A's Docker volume (random files of mixed sizes, as `bench_backup` makes them),
takes a first full backup with `caractrl backup --wait` (so the drain's final backup is the incremental one a real
drain takes), then drains A. The split is read from the project's status: the hand-off snapshot's start and
duration (final backup), the restore's start and end, and the Running transition.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import structlog
from bench_backup import make_volume
from benchlib import free_port, goal, start_apiserver, stop, wait_serving

from caravanserai import meta, v1
from caravanserai.agent.docker.naming import volume_name
from caravanserai.client import Client
from caravanserai.clock import seconds
from caravanserai.testing import EtcdServer, ensure_test_image
from caravanserai.testing.restic import RestServer

PROJECT = "bench-drain"
IDLE = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def spawn(argv: list[str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out)


def agent_argv(server: str, node: str, pool: str) -> list[str]:
    return python_module(
        "caravanserai.agent", "--server", server, "--node-name", node, "--label", f"pool={pool}",
        "--heartbeat-interval", "0.5", "--listen", "127.0.0.1:0", "--ingress-listen", "off",
        "--stop-timeout", "2", "--metrics-port", str(free_port()), "--log-level", "warning",
    )  # fmt: skip


def manager_argv(server: str) -> list[str]:
    return python_module(
        "caravanserai.controllers.manager", "--server", server, "--no-leader-elect", "--metrics-port", "-1",
        "--log-level", "warning",
    )  # fmt: skip


def caractrl(server: str, *args: str) -> str:
    done = subprocess.run(
        python_module("caravanserai.cli", "--server", server, *args), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"caractrl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def mountpoint(node: str) -> pathlib.Path:
    out = subprocess.run(
        ["docker", "volume", "inspect", "-f", "{{.Mountpoint}}", volume_name(PROJECT, "data", node)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return pathlib.Path(out.stdout.strip())


def remove_labelled(node: str) -> None:
    label = f"label=caravanserai.io/node={node}"
    for kind, rm in (("ps", ["rm", "-f", "-v"]), ("network", ["network", "rm"]), ("volume", ["volume", "rm"])):
        listing = ["ps", "-aq"] if kind == "ps" else [kind, "ls", "-q"]
        ids = subprocess.run(["docker", *listing, "--filter", label], capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["docker", *rm, *ids], capture_output=True, check=False)


async def setup_objects(client: Client, url: str, image: str, pool: str) -> None:
    secret = meta.with_type_meta(v1.Secret())
    secret.metadata.name = "bench-key"
    secret.spec.data["RESTIC_PASSWORD"] = uuid.uuid4().hex.encode()
    await client.secrets.create(secret)
    repo = meta.with_type_meta(v1.BackupRepository())
    repo.metadata.name = "bench"
    repo.spec.url, repo.spec.secret, repo.spec.initialize = url, "bench-key", True
    await client.backuprepositories.create(repo)
    p = meta.with_type_meta(v1.Project())
    p.metadata.name = PROJECT
    service = p.spec.services.add(name="app", image=image)
    service.command.extend(IDLE)
    service.volume_mounts.add(name="data", mount_path="/data")
    volume = p.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    volume.backup.repository, volume.backup.every = "bench", "1h"
    volume.backup.keep.last = 3
    p.spec.node_selector["pool"] = pool
    await client.projects.create(p)


async def running_on(client: Client, node: str, timeout: float = 900) -> tuple[v1.Project, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = await client.projects.get(PROJECT)
        if p.status.phase == v1.RUNNING and p.status.node_ref == node:
            return p, time.time()
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{PROJECT} not Running on {node}")


async def node_ready(client: Client, node: str) -> None:
    for _ in range(600):
        try:
            if (await client.nodes.get(node)).status.state == v1.NODE_READY:
                return
        except Exception:  # noqa: BLE001 - not registered yet
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError(f"node {node} not Ready")


def tar_copy(source: pathlib.Path, target: pathlib.Path) -> float:
    """Seconds to copy `source` into the empty `target` with tar (plus sync): the floor of moving the bytes."""
    target.mkdir()
    started = time.perf_counter()
    subprocess.run(f"tar -C {source} -cf - . | tar -C {target} -xf - && sync", shell=True, check=True)
    return round(time.perf_counter() - started, 3)


def split(moved: v1.Project, drained_at: float, running_at: float) -> dict[str, float]:
    """The drain's phases from the project's status (wall-clock seconds)."""
    [volume] = moved.status.volumes
    final = volume.restored.snapshot
    backup_start = seconds(final.time)
    backup_end = backup_start + final.duration_seconds
    restore_start, restore_end = seconds(volume.restored.started_at), seconds(volume.restored.finished_at)
    return {
        "stop_s": round(backup_start - drained_at, 3),
        "final_backup_s": round(final.duration_seconds, 3),
        "hand_over_s": round(restore_start - backup_end, 3),
        "restore_s": round(restore_end - restore_start, 3),
        "start_s": round(running_at - restore_end, 3),
        "total_s": round(running_at - drained_at, 3),
    }


async def measure(work: pathlib.Path, opts: argparse.Namespace) -> dict[str, Any]:
    image, pool = ensure_test_image(), f"bench-{uuid.uuid4().hex[:6]}"
    a, b = f"{pool}-a", f"{pool}-b"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with EtcdServer() as etcd, RestServer() as rest:
            address = f"127.0.0.1:{free_port()}"
            procs.append(start_apiserver(etcd.endpoint, address, f"/bench-{uuid.uuid4().hex[:6]}"))
            await wait_serving(address, procs[0])
            procs.append(spawn(manager_argv(address), work / "manager.log"))
            procs.append(spawn(agent_argv(address, a, pool), work / "agent-a.log"))
            async with Client(address) as client:
                await node_ready(client, a)
                await setup_objects(client, rest.url, image, pool)
                await running_on(client, a, timeout=120)
                files = make_volume(mountpoint(a), opts.size_mib << 20, seed=7)
                first = time.perf_counter()
                caractrl(address, "backup", PROJECT, "--wait", "--timeout", "15m")
                first_backup_s = time.perf_counter() - first
                procs.append(spawn(agent_argv(address, b, pool), work / "agent-b.log"))
                await node_ready(client, b)
                drained_at = time.time()
                caractrl(address, "drain", a, "--no-wait", "--timeout", "15m")
                moved, running_at = await running_on(client, b)
                phases = split(moved, drained_at, running_at)
                floor = tar_copy(mountpoint(b), work / "tar-copy")
        return {"files": len(files), "first_full_backup_s": round(first_backup_s, 3), **phases, "tar_copy_s": floor}
    finally:
        for proc in reversed(procs):
            stop(proc)
        for node in (a, b):
            remove_labelled(node)


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-drain-", dir=opts.dir))
    try:
        run = await measure(work, opts)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = round(run["total_s"] / run["tar_copy_s"], 2) if run["tar_copy_s"] > 0 else None
    return {
        "benchmark": "drain_with_volume",
        "size_mib": opts.size_mib,
        "goals": [
            goal(
                f"drain with a {opts.size_mib} MiB backed-up volume: drain → Running elsewhere / tar copy",
                ratio,
                10,
                at_most=True,
            ),
        ],
        "floor": "tar -c | tar -x of the same bytes between two directories of the same disk, plus sync",
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        **run,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the volume's data")
    parser.add_argument("--dir", default=None, help="where the temporary directory goes (default: the system's)")
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
