"""Data that moves with the work, end to end with real processes: an apiserver, the controller manager, two
cara-agent processes on one Docker Engine, restic and a REST repository served by `rclone serve restic`.

A counter service writes an increasing number to its Persistent volume every 0.1 s (and appends it to a log, with a
`start N` line each time it starts), so what a move kept or lost can be read off the volume:

* **Drain**: the drained node stops the service, takes a final backup and hands it over; on the other node the
  counter starts from exactly the last value written (`start N` with N the final value) — no write lost.
* **`caractrl restore`** of an older snapshot afterwards: the counter goes on from that snapshot's value.
* **Dead node** (agent SIGKILLed, its containers stopped): the project runs on the other node from the newest
  snapshot, no older than one `every` before the death, and `describe` says which snapshot and how old it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fault_processes import NODE_LABEL, Processes, agent_argv, controller_manager_argv

from caravanserai import meta, v1
from caravanserai.agent.docker.naming import volume_name
from caravanserai.client import Client
from caravanserai.testing import free_port
from caravanserai.testing.restic import ResticRepository, RestServer
from caravanserai.testing.wait import wait_for
from support.processes import ApiProcess

pytestmark = pytest.mark.docker

EVERY = 10.0
PASSWORD = "correct horse battery staple"
COUNTER = [
    "sh",
    "-c",
    "trap 'exit 0' TERM; n=$(cat /data/n 2>/dev/null || echo 0); echo \"start $n\" >> /data/log; "
    "while true; do n=$((n+1)); echo $n > /data/n.tmp; mv /data/n.tmp /data/n; echo $n >> /data/log; "
    "sync; sleep 0.1 & wait; done",
]


@pytest.fixture
async def client(api_process: ApiProcess) -> AsyncIterator[Client]:
    async with Client(api_process.address, timeout=5, retry_timeout=10) as c:
        yield c


@pytest.fixture
async def rest() -> AsyncIterator[RestServer]:
    async with RestServer() as server:
        yield server


async def repository(client: Client, url: str) -> None:
    """The Secret with the repository password and a BackupRepository the agents may initialise."""
    secret = meta.with_type_meta(v1.Secret())
    secret.metadata.name = "offsite-key"
    secret.spec.data["RESTIC_PASSWORD"] = PASSWORD.encode()
    await client.secrets.create(secret)
    repo = meta.with_type_meta(v1.BackupRepository())
    repo.metadata.name = "offsite"
    repo.spec.url = url
    repo.spec.secret = "offsite-key"
    repo.spec.initialize = True
    await client.backuprepositories.create(repo)


def counter_project(image: str, pool: str) -> v1.Project:
    p = meta.with_type_meta(v1.Project())
    p.metadata.name = "counter"
    service = p.spec.services.add(name="counter", image=image)
    service.command.extend(COUNTER)
    service.volume_mounts.add(name="data", mount_path="/data")
    volume = p.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    volume.backup.repository = "offsite"
    volume.backup.every = f"{EVERY:g}s"
    volume.backup.keep.last = 10
    p.spec.node_selector["pool"] = pool
    return p


def agent(server: str, node: str, pool: str) -> list[str]:
    return [*agent_argv(server, node, metrics_port=free_port()), "--label", f"pool={pool}"]


def manager(server: str) -> list[str]:
    return controller_manager_argv(
        server, "--heartbeat-timeout", "2s", "--grace-period", "1s", "--startup-grace-period", "1s"
    )


def volume_dir(node: str) -> Path | None:
    """The data directory of the counter's volume on `node` (None while there is no such volume)."""
    result = subprocess.run(
        ["docker", "volume", "inspect", "-f", "{{.Mountpoint}}", volume_name("counter", "data", node)],
        capture_output=True,
        text=True,
        check=False,
    )
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def read_counter(node: str) -> int | None:
    directory = volume_dir(node)
    with contextlib.suppress(OSError, ValueError):
        return int((directory / "n").read_text()) if directory is not None else None
    return None


class CounterWatch:
    """Samples the counter on one node's volume every 20 ms: (monotonic time, value), for as long as it runs."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.samples: list[tuple[float, int]] = []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            value = read_counter(self.node)
            if value is not None:
                self.samples.append((time.monotonic(), value))
            await asyncio.sleep(0.02)

    @property
    def last(self) -> int:
        return max(value for _, value in self.samples)

    def at(self, moment: float) -> int:
        """The counter's value at `moment` (the last sample not after it)."""
        return max((value for at, value in self.samples if at <= moment), default=0)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def running_on(client: Client, node: str, timeout: float = 60) -> v1.Project:
    async def there() -> v1.Project | None:
        p = await client.projects.get("counter")
        return p if p.status.phase == v1.RUNNING and p.status.node_ref == node else None

    found: v1.Project = await wait_for(there, timeout, interval=0.2, message=f"counter Running on {node}")
    return found


def last_start(node: str) -> int | None:
    """The N of the last `start N` line in the log on `node`'s volume: where the counter last went on from."""
    directory = volume_dir(node)
    with contextlib.suppress(OSError):
        lines = (directory / "log").read_text().splitlines() if directory is not None else []
        starts = [line for line in lines if line.startswith("start ")]
        return int(starts[-1].split()[1]) if starts else None
    return None


async def restored_start(node: str, timeout: float = 30) -> int:
    """The counter's start on `node` after a move (its log's last `start N`, once there is one after a's)."""

    async def started() -> int | None:
        value = last_start(node)
        return value if value else None  # "start 0" is the first start, on the first node

    found: int = await wait_for(started, timeout, interval=0.1, message=f"the counter started on {node}")
    return found


async def first_backup(client: Client, timeout: float = EVERY * 3) -> v1.SnapshotRecord:
    async def taken() -> v1.SnapshotRecord | None:
        p = await client.projects.get("counter")
        volumes = [v for v in p.status.volumes if v.name == "data" and v.last_backup.id]
        return volumes[0].last_backup if volumes else None

    found: v1.SnapshotRecord = await wait_for(taken, timeout, interval=0.2, message="a first backup")
    return found


def caractrl(server: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "caravanserai.cli", "--server", server, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_drain_hands_the_final_snapshot_over_and_the_counter_loses_no_write(
    api_process: ApiProcess,
    client: Client,
    processes: Processes,
    docker_nodes: set[str],
    docker_image: str,
    rest: RestServer,
) -> None:
    pool = f"vol-{uuid.uuid4().hex[:6]}"
    a, b = f"{pool}-a", f"{pool}-b"
    docker_nodes.update({a, b})
    await repository(client, rest.url)
    await processes.start("manager", manager(api_process.address))
    await processes.start("agent-a", agent(api_process.address, a, pool))
    await client.projects.create(counter_project(docker_image, pool))
    await running_on(client, a)
    watch = CounterWatch(a)
    await first_backup(client)
    await processes.start("agent-b", agent(api_process.address, b, pool))
    await asyncio.sleep(1.0)
    try:
        await asyncio.to_thread(caractrl, api_process.address, "drain", a, "--timeout", "90s")
        await running_on(client, b)
    finally:
        await watch.stop()
    final = watch.last
    assert final > 0
    assert await restored_start(b) == final  # exactly the last value written on a
    moved = await client.projects.get("counter")
    [volume] = moved.status.volumes
    assert volume.restored.snapshot.node == a and volume.node == b
    assert "restored snapshot" in volume.message

    # Back to the oldest snapshot by hand: the counter goes on from the value in it.
    oldest = volume.snapshots[-1]
    assert oldest.id != volume.restored.snapshot.id
    in_it = int(await ResticRepository(rest.url, PASSWORD).run("dump", oldest.id, "n"))
    await asyncio.to_thread(
        caractrl, api_process.address, "restore", "counter", "--volume", "data", "--snapshot", oldest.id[:8], "--wait"
    )
    assert 0 < in_it < final

    async def went_back() -> bool:
        return last_start(b) == in_it

    await wait_for(went_back, 30, interval=0.1, message=f"the counter going on from {in_it} on {b}")


async def test_a_dead_node_loses_at_most_one_every_and_describe_says_which_snapshot(
    api_process: ApiProcess,
    client: Client,
    processes: Processes,
    docker_nodes: set[str],
    docker_image: str,
    rest: RestServer,
) -> None:
    pool = f"vol-{uuid.uuid4().hex[:6]}"
    a, b = f"{pool}-a", f"{pool}-b"
    docker_nodes.update({a, b})
    await repository(client, rest.url)
    await processes.start("manager", manager(api_process.address))
    agent_a = await processes.start("agent-a", agent(api_process.address, a, pool))
    await client.projects.create(counter_project(docker_image, pool))
    await running_on(client, a)
    watch = CounterWatch(a)
    await first_backup(client)
    await processes.start("agent-b", agent(api_process.address, b, pool))
    await asyncio.sleep(1.0)

    await agent_a.kill()  # the node dies: its agent at once, its containers right after
    ids = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label={NODE_LABEL}={a}"], capture_output=True, text=True, check=True
    ).stdout.split()
    subprocess.run(["docker", "kill", *ids], capture_output=True, check=False)
    died = time.monotonic()
    await asyncio.sleep(0.2)
    await watch.stop()

    moved = await running_on(client, b)
    started = await restored_start(b)
    assert started >= watch.at(died - EVERY - 2.0)  # no older than one `every` (and a backup's duration)
    assert started <= watch.last
    [volume] = moved.status.volumes
    assert volume.restored.snapshot.node == a
    described = await asyncio.to_thread(caractrl, api_process.address, "describe", "project", "counter")
    short = volume.restored.snapshot.id[:8]
    assert "restored snapshot" in described and short in described and a in described
