"""Helpers the benchmarks share: free loopback ports (`caravanserai.testing.free_port`), starting and waiting for an
apiserver process, process CPU time, percentiles, and the goal lines `run_all.py` prints.

Importing it makes the suite's own support (`tests/support`, imported as `support`) importable too: the benchmarks
run from a source checkout, as the tests do.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from caravanserai.client import Client
from caravanserai.testing import free_port

TESTS = pathlib.Path(__file__).resolve().parents[1] / "tests"
"""The folder that holds the suite's `support` package."""

if str(TESTS) not in sys.path:
    sys.path.append(str(TESTS))


def process_cpu(pid: int) -> float:
    """User + system CPU seconds used so far by process `pid` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_cpu() -> float:
    """CPU seconds every process of the machine has used so far, over all cores (Linux /proc/stat: all but idle
    and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """A process's CPU seconds and the machine's busy CPU seconds, sampled every `period` seconds (from `run`), so
    that a phase can be measured in CPU time between two instants of `time.perf_counter` (`between`)."""

    def __init__(self, pid: int, period: float = 0.2) -> None:
        self.pid, self.period = pid, period
        self.samples: list[tuple[float, float, float]] = []  # (perf_counter, process cpu, machine busy cpu)

    async def run(self) -> None:
        while True:
            self.samples.append((time.perf_counter(), process_cpu(self.pid), machine_busy_cpu()))
            await asyncio.sleep(self.period)

    def between(self, start: float, end: float) -> tuple[float, float, float]:
        """(process CPU s, machine busy CPU s, wall s) between the samples nearest `start` and `end`."""
        first = min(self.samples, key=lambda sample: abs(sample[0] - start))
        last = min(self.samples, key=lambda sample: abs(sample[0] - end))
        return last[1] - first[1], last[2] - first[2], last[0] - first[0]


def cpu_per_item(
    names: list[str], procs: list[subprocess.Popen[bytes]], before: list[float], count: int
) -> dict[str, float]:
    """CPU milliseconds per item (of `count`) of each process of `procs` (named by `names`) since `before` (their
    `process_cpu` then), and the total."""
    spent = {
        n: round((process_cpu(p.pid) - b) * 1000 / count, 1) for n, p, b in zip(names, procs, before, strict=False)
    }
    return {**spent, "total": round(sum(spent.values()), 1)}


def start_apiserver(etcd_endpoint: str, address: str, prefix: str, *extra: str) -> subprocess.Popen[bytes]:
    """`cara-apiserver` as its own process (run as `python -m`, so PYTHONPATH can point at another source tree to
    compare against), serving `address` over etcd under `prefix`, quiet, no metrics listener."""
    return subprocess.Popen(
        [sys.executable, "-m", "caravanserai.apiserver", "--etcd-endpoints", etcd_endpoint, "--listen", address,
         "--metrics-listen", "off", "--etcd-prefix", prefix, "--log-level", "warning", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate `proc` and wait for it (killed after 15 s)."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def spawn(args: list[str], log_path: str) -> subprocess.Popen[bytes]:
    """One of this environment's commands (`args[0]`, e.g. `cara-agent`) as its own process, its stderr appended
    to `log_path`."""
    exe = os.path.join(os.path.dirname(sys.executable), args[0])
    with open(log_path, "ab") as log_file:
        return subprocess.Popen([exe, *args[1:]], stdout=subprocess.DEVNULL, stderr=log_file)


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0) -> None:
    """Return once `check()` answers True (an exception counts as not yet); TimeoutError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{what} did not happen within {timeout:g}s")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of `values` by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]


def goal(name: str, figure: float | None, target: float, *, at_most: bool, unit: str = "") -> dict[str, Any]:
    """One goal line: the measured `figure` against `target` (`at_most`: lower is better) and its verdict."""
    if figure is None:
        verdict = "not measured"
    else:
        verdict = "met" if (figure <= target if at_most else figure >= target) else "not met"
    return {
        "goal": name,
        "figure": figure,
        "target": f"{'<=' if at_most else '>='} {target:g}{unit}",
        "verdict": verdict,
    }


async def wait_serving(address: str, proc: subprocess.Popen[bytes], *, attempts: int = 300) -> None:
    """Return once the apiserver at `address` answers a List; fail if `proc` exits or it never answers."""
    async with Client(address, retry_timeout=0) as c:
        for _ in range(attempts):
            if proc.poll() is not None:
                raise RuntimeError("cara-apiserver exited during start-up")
            try:
                await c.projects.list(limit=1)
                return
            except Exception:  # noqa: BLE001 - not up yet
                await asyncio.sleep(0.1)
    raise TimeoutError("cara-apiserver did not answer")


MIN_PENDING_RATE = 20.0  # binds/s below which a pending phase is called failed rather than slow


def pending_timeout(projects: int) -> float:
    """Seconds a pending phase of `projects` may take: 300, or more when at least `MIN_PENDING_RATE` binds/s
    would need it (a loaded machine is slow, not broken)."""
    return max(300.0, projects / MIN_PENDING_RATE)


__all__ = [
    "CpuSampler",
    "MIN_PENDING_RATE",
    "machine_busy_cpu",
    "pending_timeout",
    "cpu_per_item",
    "free_port",
    "spawn",
    "wait_until",
    "goal",
    "percentile",
    "process_cpu",
    "start_apiserver",
    "stop",
    "wait_serving",
]
