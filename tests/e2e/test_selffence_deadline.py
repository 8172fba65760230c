"""The self-fence bounds the overlap even when a service ignores SIGTERM: its copy is gone by `--fence-after`."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import pytest
from agent_harness import StartAgent, bind, docker, wait_phase

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

# The stop timeout plus the fence's lead margin (1.5 s) is just under half of `--fence-after`, so the fence starts
# at the latest moment it may and the SIGKILL comes just before the deadline (as with 20 s and 8 s, in 6 s less).
FENCE_AFTER = 14.0
GRACE = "5s"  # the service's stop timeout: SIGKILL comes 5 s after SIGTERM
DEADLINE_SLACK = 0.5  # Docker's own latency in reporting the exit


def _finished_at(container: str) -> float | None:
    state = docker("inspect", "-f", "{{.State.Running}} {{.State.FinishedAt}}", container)
    running, finished = state.split()
    if running == "true":
        return None
    return datetime.fromisoformat(finished[:26].rstrip("Z") + "+00:00").timestamp()


async def test_a_service_ignoring_sigterm_is_gone_by_the_fence_deadline(
    api: RunningApiServer, client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent(fence_after=FENCE_AFTER, stop_timeout=1)
    p = project("stubborn")
    del p.spec.services[:]
    svc = p.spec.services.add(name="deaf", image=image)
    svc.command.extend(["sh", "-c", "exec sleep 3600"])  # PID 1 without a handler: SIGTERM does nothing
    svc.stop_grace_period = GRACE
    await client.projects.create(p)
    await bind(client, "stubborn", agent.node)
    await wait_phase(client, "stubborn", v1.RUNNING, timeout=30)
    container = naming.container_name("stubborn", "deaf", agent.node)

    await api.stop()  # the agent is cut off: its last answered heartbeat is before this moment
    cut = time.time()
    finished = await wait_for(
        lambda: asyncio.to_thread(_finished_at, container), timeout=FENCE_AFTER + 15, interval=0.2, message="stopped"
    )
    print(f"fenced copy gone {finished - cut:.2f} s after the cut (deadline {FENCE_AFTER} s)")
    assert finished - cut <= FENCE_AFTER + DEADLINE_SLACK
