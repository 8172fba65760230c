"""Run directories of the fleet harness, and the removal of everything a run made, even of a killed run.

Each run owns `RUNS_ROOT/<run_id>/` (Docker data, etcd data, certificates, logs) with two files: `owner` (the pid
of the test process) and `subnet`. `remove_run(run_id)` takes down, in order:

1. every process in the run's namespaces (`ip netns pids`: dockerd, containerd and its shims, etcd, apiservers,
   controllers, agents) and every process in the run's container cgroups (each host's dockerd runs its containers
   under the cgroup parent `/<prefix>-<host>`), with SIGKILL;
2. every mount below the run directory (overlay layers, shm, namespace bind mounts), deepest first;
3. the cgroups, the namespaces, links, FORWARD rule, and last the unreachable route (`netns.remove_run_network`);
4. the run directory.

`remove_leftovers()` does this for every run whose owner process no longer exists; a harness calls it before it
makes a new run, so a run killed with SIGKILL costs nothing but disk space until the next one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

from support.fleet.netns import PREFIX, remove_run_network, sh

RUNS_ROOT = Path("/var/tmp/caravanserai-fleet")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def run_dir(run_id: str) -> Path:
    return RUNS_ROOT / run_id


def claim_run(run_id: str, subnet: str) -> Path:
    """Create the run directory and record this process as its owner."""
    path = run_dir(run_id)
    path.mkdir(parents=True, exist_ok=False)
    (path / "owner").write_text(str(os.getpid()))
    (path / "subnet").write_text(subnet)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftover_runs() -> list[str]:
    """Run ids whose owner process is gone."""
    if not RUNS_ROOT.is_dir():
        return []
    found = []
    for path in RUNS_ROOT.iterdir():
        try:
            owner = int((path / "owner").read_text())
        except (OSError, ValueError):
            owner = 0
        if not owner or not _alive(owner):
            found.append(path.name)
    return found


def _cgroup_dirs(prefix: str) -> list[Path]:
    """Container cgroups of a run, deepest first, in every mounted hierarchy (v1 and v2)."""
    dirs: list[Path] = []
    for hierarchy in [CGROUP_ROOT, *CGROUP_ROOT.iterdir()] if CGROUP_ROOT.is_dir() else []:
        if not hierarchy.is_dir():
            continue
        with contextlib.suppress(OSError):
            for top in hierarchy.glob(f"{prefix}-*"):
                dirs.extend(sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)))
                dirs.append(top)
    return dirs


def _kill_processes(run_id: str) -> None:
    prefix = f"{PREFIX}{run_id}"
    pids: set[int] = set()
    for line in sh("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"{prefix}-"):
            pids.update(int(p) for p in sh("ip", "netns", "pids", name, check=False).split())
    for cgroup in _cgroup_dirs(prefix):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(p) for p in (cgroup / "cgroup.procs").read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _unmount_below(path: Path) -> None:
    root = str(path)
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    points = [p.replace("\\040", " ") for p in points if p == root or p.startswith(root + "/")]
    for point in sorted(points, key=len, reverse=True):
        sh("umount", "-l", point, check=False)


def remove_run(run_id: str) -> None:
    """Remove everything of run `run_id` (see the module docstring). Safe to call twice."""
    path = run_dir(run_id)
    subnet = None
    with contextlib.suppress(OSError):
        subnet = (path / "subnet").read_text().strip() or None
    _kill_processes(run_id)
    _unmount_below(path)
    for cgroup in _cgroup_dirs(f"{PREFIX}{run_id}"):
        with contextlib.suppress(OSError):
            cgroup.rmdir()
    remove_run_network(run_id, subnet)
    shutil.rmtree(path, ignore_errors=True)


def remove_leftovers() -> list[str]:
    """Remove every run whose owner is gone; the ids removed."""
    runs = leftover_runs()
    for run_id in runs:
        remove_run(run_id)
    return runs


__all__ = ["RUNS_ROOT", "claim_run", "leftover_runs", "remove_leftovers", "remove_run", "run_dir"]
