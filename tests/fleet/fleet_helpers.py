"""What fleet tests read from outside the processes under test: placements from the API, copies from each
host's Docker Engine, and the reset between tests."""

from __future__ import annotations

import asyncio

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.testing.wait import wait_for
from support.fleet import EngineContainer, Fleet, engine_time

PROJECT_LABEL = "caravanserai.io/project"
HEARTBEAT_TIMEOUT = 5.0  # the fleet's node-health timings (short, to keep the tier within minutes)
GRACE_PERIOD = 5.0

# A service that exits at once on SIGTERM (busybox sh as PID 1 only gets signals it traps).
QUICK_STOP = ["sh", "-c", "trap 'exit 0' TERM; echo started on $(hostname); sleep 3600 & wait"]


async def copies(fleet: Fleet, project: str, *, running: bool = True) -> dict[str, list[EngineContainer]]:
    """Containers of `project` per worker host (only running ones unless `running=False`)."""
    found: dict[str, list[EngineContainer]] = {}
    for name, docker in fleet.dockers.items():
        if not docker.process.running:
            continue
        rows = await docker.containers(f"label={PROJECT_LABEL}={project}")
        rows = [r for r in rows if r.running or not running]
        if rows:
            found[name] = rows
    return found


async def all_containers(fleet: Fleet) -> int:
    """How many Caravanserai containers all engines hold."""
    total = 0
    for docker in fleet.dockers.values():
        total += len(await docker.containers(f"label={PROJECT_LABEL}"))
    return total


async def reset(fleet: Fleet) -> None:
    """Heal and restart everything, delete every project, wait until every engine is empty."""
    await fleet.restore()
    async with fleet.client(timeout=5, retry_timeout=30) as client:
        for project in await client.projects.list():
            await client.projects.delete(project.metadata.name, force=True)

        async def empty() -> bool:
            return not (await client.projects.list()).items and await all_containers(fleet) == 0

        await wait_for(empty, 60, interval=0.5, message="projects and containers removed")


async def phases(client: Client, names: list[str]) -> dict[str, tuple[str, str]]:
    """name → (phase, node) of the projects `names`."""
    out = {}
    for project in await client.projects.list():
        if project.metadata.name in names:
            out[project.metadata.name] = (project.status.phase, project.status.node_ref)
    return out


async def wait_running(client: Client, names: list[str], timeout: float = 60.0) -> dict[str, str]:
    """Until every project of `names` is Running; name → node."""

    async def check() -> dict[str, str] | None:
        seen = await phases(client, names)
        if len(seen) == len(names) and all(phase == v1.RUNNING for phase, _ in seen.values()):
            return {name: node for name, (_, node) in seen.items()}
        return None

    result: dict[str, str] = await wait_for(check, timeout, interval=0.2, message=f"{names} Running")
    return result


async def container_times(fleet: Fleet, host: str, container_id: str) -> tuple[float, float]:
    """(StartedAt, FinishedAt) of a container as its engine recorded them (FinishedAt 0.0 while it runs).
    Every engine runs on the same machine, so times of different hosts compare."""
    result = await asyncio.to_thread(
        fleet.dockers[host].cli, "inspect", "--format", "{{.State.StartedAt}} {{.State.FinishedAt}}", container_id
    )
    started, finished = result.stdout.decode().split()
    return engine_time(started), engine_time(finished)


__all__ = [
    "GRACE_PERIOD",
    "HEARTBEAT_TIMEOUT",
    "QUICK_STOP",
    "all_containers",
    "container_times",
    "copies",
    "phases",
    "reset",
    "wait_running",
]
