"""Real processes for fault tests, and what the tests read from outside them.

* `OsProcess`: one of our commands (`python -m …`) as a child process that a test may SIGKILL, SIGSTOP/SIGCONT
  or restart with the same arguments. Its stderr goes to a log file whose tail failing tests show.
* `scheduler_argv`, `controller_manager_argv`, `agent_argv`: the command lines, with small timings.
* Docker as seen by the docker CLI (`containers`, `remove_labelled`), and an agent's Prometheus counters
  (`scrape`), so assertions never depend on the internals of the process under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from support import http
from support.fleet.process import HostProcess

NODE_LABEL = "caravanserai.io/node"
PROJECT_LABEL = "caravanserai.io/project"
SERVICE_LABEL = "caravanserai.io/service"

# A service that exits at once on SIGTERM (busybox sh as PID 1 only gets signals it traps), so a removal by the
# agent takes milliseconds instead of its stop timeout.
QUICK_STOP = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]


class OsProcess(HostProcess):
    """A command run as a child process (in this network namespace); `start()` again after `kill()` runs it anew
    with the same argv. The fleet harness's `HostProcess`, which dies with the test run."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        super().__init__(name, argv, log_path=log_path)


@dataclass
class Processes:
    """Every process a test started, stopped (or killed) at teardown whatever the outcome."""

    log_dir: Path
    started: list[OsProcess] = field(default_factory=list)

    async def start(self, name: str, argv: list[str]) -> OsProcess:
        process = OsProcess(name, argv, self.log_dir / f"{name}.log")
        self.started.append(process)
        await process.start()
        return process

    async def stop_all(self) -> None:
        await asyncio.gather(*(p.stop() for p in self.started))

    def logs(self) -> str:
        return "\n".join(f"==== {p.name} ====\n{p.log_tail()}" for p in self.started)


def _python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def scheduler_argv(server: str, identity: str, *extra: str) -> list[str]:
    """cara-scheduler with leader election on a short lease: a dead leader is replaced within ~2.5 s."""
    return _python_module(
        "caravanserai.controllers.scheduler",
        "--server", server,
        "--leader-elect-identity", identity,
        "--leader-elect-lease-duration", "2s",
        "--leader-elect-renew-deadline", "1500ms",
        "--leader-elect-retry-period", "200ms",
        "--metrics-port", "-1",
        "--log-format", "console",
        *extra,
    )  # fmt: skip


def controller_manager_argv(server: str, *extra: str) -> list[str]:
    """cara-controller-manager as the only replica (no leader election), without a metrics port."""
    return _python_module(
        "caravanserai.controllers.manager", "--server", server, "--no-leader-elect", "--metrics-port", "-1",
        "--log-format", "console", *extra,
    )  # fmt: skip


def agent_argv(server: str, node: str, *, metrics_port: int, network_pool: int | None = 2) -> list[str]:
    """cara-agent for `node` on the local Docker Engine, beating every 0.5 s, stopping containers within 1 s, with
    `network_pool` spare networks (None: cara-agent's default, ten per core, which the agent fills before its first
    heartbeat and empties on a clean stop, a Docker call per network: seconds per agent that other tests skip)."""
    pool = [] if network_pool is None else ["--network-pool", str(network_pool)]
    return _python_module(
        "caravanserai.agent",
        "--server", server,
        "--node-name", node,
        "--heartbeat-interval", "0.5",
        "--listen", "127.0.0.1:0",
        "--ingress-listen", "127.0.0.1:0",
        "--stop-timeout", "1",
        *pool,
        "--metrics-port", str(metrics_port),
        "--log-level", "info",
    )  # fmt: skip


# ---- Docker, through its CLI -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Container:
    """One container as `docker ps -a` shows it, with the labels the agent put on it."""

    id: str
    name: str
    state: str
    node: str
    project: str
    service: str
    networks: str  # the networks it is configured on, comma-separated

    @property
    def running(self) -> bool:
        return self.state == "running"


_PS_FORMAT = "\t".join(
    ["{{.ID}}", "{{.Names}}", "{{.State}}"]
    + [f'{{{{.Label "{label}"}}}}' for label in (NODE_LABEL, PROJECT_LABEL, SERVICE_LABEL)]
    + ["{{.Networks}}"]
)


async def _docker(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "docker", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed: {err.decode(errors='replace').strip()}")
    return out.decode()


async def containers(*labels: str) -> list[Container]:
    """Containers carrying every `key=value` label given, running or not, sorted by name."""
    filters = [arg for label in labels for arg in ("--filter", f"label={label}")]
    out = await _docker("ps", "-a", "--no-trunc", *filters, "--format", _PS_FORMAT)
    found = [Container(*line.split("\t")) for line in out.splitlines() if line.strip()]
    return sorted(found, key=lambda c: c.name)


async def started_at(container_ids: Sequence[str]) -> dict[str, str]:
    """Container id → the time Docker last started it (a restart changes it)."""
    if not container_ids:
        return {}
    out = await _docker("inspect", "-f", "{{.Id}} {{.State.StartedAt}}", *container_ids)
    return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())


async def networks(*labels: str) -> set[str]:
    """Names of the networks carrying every `key=value` label given."""
    filters = [arg for label in labels for arg in ("--filter", f"label={label}")]
    return {line for line in (await _docker("network", "ls", *filters, "--format", "{{.Name}}")).splitlines() if line}


def remove_labelled(node: str) -> None:
    """Remove every container, network and volume labelled for `node` (blocking; best effort)."""
    label = f"label={NODE_LABEL}={node}"

    def run(*args: str) -> list[str]:
        result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, check=False)
        return [line for line in result.stdout.splitlines() if line.strip()]

    ids = run("ps", "-aq", "--filter", label)
    if ids:
        run("rm", "-f", "-v", *ids)
    for kind in ("network", "volume"):
        names = run(kind, "ls", "-q", "--filter", label)
        if names:
            run(kind, "rm", *names)


# ---- an agent's Prometheus counters --------------------------------------------------------------------------


def _fetch(url: str) -> str:
    return http.get_ok(url, timeout=2).decode()


async def scrape(port: int) -> dict[str, float]:
    """`/metrics` on 127.0.0.1:`port` as {sample name with its labels: value}; {} when nothing answers."""
    with contextlib.suppress(OSError):
        text = await asyncio.to_thread(_fetch, f"http://127.0.0.1:{port}/metrics")
        samples = (re.match(r"^(\S+)\s+(\S+)$", line) for line in text.splitlines() if not line.startswith("#"))
        return {m.group(1): float(m.group(2)) for m in samples if m is not None}
    return {}


def metric(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for key, value in samples.items():
        base, _, rest = key.partition("{")
        if base == name and all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += value
    return total


__all__ = [
    "Container",
    "NODE_LABEL",
    "OsProcess",
    "PROJECT_LABEL",
    "Processes",
    "QUICK_STOP",
    "SERVICE_LABEL",
    "agent_argv",
    "containers",
    "controller_manager_argv",
    "metric",
    "remove_labelled",
    "scheduler_argv",
    "scrape",
    "started_at",
]
