"""Helpers for the agent's end-to-end tests: the docker CLI, binding projects, waiting for phases."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig
from caravanserai.client import Client
from caravanserai.errors import NotFound
from caravanserai.testing.wait import wait_for

NODE_LABEL = "caravanserai.io/node"


def docker(*args: str, check: bool = True) -> str:
    """Run the docker CLI and return its stdout (stripped)."""
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def docker_list(kind: str, label: str) -> list[str]:
    """Names of containers/networks/volumes carrying `label` (key=value)."""
    if kind == "container":
        out = docker("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}")
    else:
        out = docker(kind, "ls", "--filter", f"label={label}", "--format", "{{.Name}}")
    return sorted(line for line in out.splitlines() if line)


def container_ids(label: str) -> dict[str, str]:
    """Container name → full id for containers carrying `label`."""
    out = docker("ps", "-a", "--no-trunc", "--filter", f"label={label}", "--format", "{{.Names}} {{.ID}}")
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def remove_node_objects(node: str) -> None:
    """Remove every container, network and volume labelled for `node` (best effort, all of them)."""
    label = f"{NODE_LABEL}={node}"
    names = docker_list("container", label)
    if names:
        docker("rm", "-f", "-v", *names, check=False)
    for kind in ("network", "volume"):
        names = docker_list(kind, label)
        if names:
            docker(kind, "rm", *names, check=False)


@dataclass
class RunningAgent:
    """An agent running as a task of the test's event loop."""

    agent: Agent
    task: asyncio.Task[None]
    config: AgentConfig

    @property
    def node(self) -> str:
        return self.config.node_name

    async def stop(self) -> None:
        """Cancel the agent as SIGTERM would (containers keep running)."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


StartAgent = Callable[..., Awaitable[RunningAgent]]
"""`await start_agent(node=…, **AgentConfig overrides)`: the `start_agent` fixture's function."""


async def bind(client: Client, name: str, node: str) -> v1.Project:
    """Schedule project `name` onto `node` as the scheduler would (Pending → Scheduled)."""
    project = meta.copy(await client.projects.get(name))
    project.status.node_ref = node
    meta.set_phase(project, v1.SCHEDULED, reason="Scheduled", message=f"bound to {node} by the test", now=0.0)
    return await client.projects.update_status(project)


async def wait_phase(client: Client, name: str, phase: str, *, timeout: float = 30.0) -> v1.Project:
    """Wait until project `name` is in `phase` and return it."""

    async def reached() -> v1.Project | None:
        project = await client.projects.get(name)
        return project if project.status.phase == phase else None

    return await wait_for(reached, timeout=timeout, message=f"project {name} to be {phase}")


async def wait_gone(client: Client, name: str, *, timeout: float = 30.0) -> None:
    async def gone() -> bool:
        try:
            await client.projects.get(name)
        except NotFound:
            return True
        return False

    await wait_for(gone, timeout=timeout, message=f"project {name} to be gone")
