"""What a fleet run may leave behind after its teardown, looked for from the outside: processes, namespaces,
links, routes, iptables rules, cgroups and the run directory of the run, and containers or networks of the soak's
projects on the machine's own Docker Engine. `find(run_id, subnet, project_prefix)` lists each thing found."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support.fleet.cleanup import RUNS_ROOT
from support.fleet.netns import PREFIX

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _out(*argv: str) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout


def _processes(markers: list[str]) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(marker in cmdline for marker in markers):
            found.append(f"pid {entry}: {cmdline.strip()[:160]}")
    return found


def find(run_id: str, subnet: str, project_prefix: str) -> dict[str, list[str]]:
    """kind → what of run `run_id` is still there (empty lists: nothing)."""
    prefix = f"{PREFIX}{run_id}"
    run_dir = RUNS_ROOT / run_id
    cgroups = [str(p) for h in (CGROUP_ROOT, *CGROUP_ROOT.glob("*")) if h.is_dir() for p in h.glob(f"{prefix}-*")]
    docker = ["docker", "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=cara_{project_prefix}"]
    networks = ["docker", "network", "ls", "--format", "{{.Name}}", "--filter", f"name=cara_{project_prefix}"]
    return {
        "processes": _processes([str(run_dir), f"/run/netns/{prefix}-"]),
        "namespaces": [n for n in _out("ip", "netns", "list").split() if n.startswith(prefix)],
        "links": [
            line.split(":")[1].strip() for line in _out("ip", "-o", "link", "show").splitlines() if prefix in line
        ],
        "routes": [r for r in _out("ip", "-4", "route", "show", "table", "all").splitlines() if subnet in r],
        "iptables": [r for r in _out("iptables", "-S", "FORWARD").splitlines() if f"--comment {prefix}" in r],
        "cgroups": cgroups,
        "run_dir": [str(run_dir)] if run_dir.exists() else [],
        "containers": _out(*docker).split(),
        "networks": _out(*networks).split(),
    }


__all__ = ["find"]
