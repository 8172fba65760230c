"""The machinery behind `cara`: the state file, the processes of a local cluster, prerequisite and port checks.

Nothing here prints or exits: `caravanserai.cli.cara` turns what these functions report into one-line errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pwd
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caravanserai import v1
from caravanserai.cli.supervisor import (
    STATE_FILE,
    SUPERVISOR_MODULE,
    cluster_processes,
    is_supervisor,
    process_alive,
    process_cmdline,
)
from caravanserai.client import Client
from caravanserai.errors import CaravanseraiError, NotFound
from caravanserai.process.tls import TLSFiles
from caravanserai.text.addresses import UnixSocket, parse_docker_host

DEFAULT_ETCD_PORT = 23790
"""etcd's client port under `cara up` (not etcd's usual 2379, so that a system etcd can run beside it)."""


ETCD_MISSING = "etcd is not installed: install the Debian package etcd-server (apt-get install etcd-server)"


DOCKER_MISSING = (
    "Docker is not installed: install the Debian package docker.io (apt-get install docker.io), "
    "or run `cara up --no-agent` for a control plane without a node"
)


LOCK_FILE = "cara.lock"
"""Held by `cara up` while it checks and starts, and by `cara down`."""


State = dict[str, Any]


def default_data_dir() -> Path:
    """`$XDG_DATA_HOME/caravanserai`, by default `~/.local/share/caravanserai`."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "caravanserai"


def port_problem(host: str, port: int) -> str | None:
    """None when a server could listen on host:port now, else why not (a listener holds it, no such address)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"cannot resolve {host}: {exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no obstacle
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def read_state(data: Path) -> State | None:
    """The state file of the cluster in `data` while its supervisor runs; None when no supervisor runs."""
    try:
        state: State = json.loads((data / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if is_supervisor(int(state.get("supervisor_pid", 0))) else None


def _stale_children(data: Path) -> list[int]:
    """Children listed in a state file whose supervisor is gone, when they still run what was recorded."""
    try:
        state: State = json.loads((data / STATE_FILE).read_text())
    except (OSError, ValueError):
        return []
    pids = []
    for child in state.get("children", {}).values():
        pid = int(child.get("pid", 0))
        if process_alive(pid) and process_cmdline(pid) == child.get("argv"):
            pids.append(pid)
    return pids


def leftover_processes(data: Path) -> list[int]:
    """Processes of the cluster in `data` that still run (every one when its supervisor was killed)."""
    return sorted(set(cluster_processes(data)) | set(_stale_children(data)))


def stop_processes(pids: list[int], grace: float) -> list[int]:
    """SIGTERM `pids`, SIGKILL those still alive after `grace` seconds; returns those that survived even that."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(process_alive(pid) for pid in pids):
            time.sleep(0.1)
        pids = [pid for pid in pids if process_alive(pid)]
        if not pids:
            break
    return pids


@dataclass(frozen=True, slots=True)
class RunningCluster:
    """A supervisor of `cara up` running on this machine, as its command line says (readable for every user's
    processes, unlike their environment or data directory)."""

    pid: int
    data_dir: str
    api_listen: str
    user: str


def running_clusters() -> list[RunningCluster]:
    """Every `cara up` supervisor running on this machine (any user's; Linux /proc), by pid."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for name in names:
        if not name.isdigit():
            continue
        cluster = _supervisor_of(int(name))
        if cluster is not None:
            found.append(cluster)
    return sorted(found, key=lambda c: c.pid)


def _supervisor_of(pid: int) -> RunningCluster | None:
    argv = process_cmdline(pid)
    if SUPERVISOR_MODULE not in argv or argv.index(SUPERVISOR_MODULE) + 1 >= len(argv):
        return None
    try:
        spec = json.loads(argv[argv.index(SUPERVISOR_MODULE) + 1])
        owner = os.stat(f"/proc/{pid}").st_uid
    except (ValueError, OSError):
        return None
    if not isinstance(spec, dict) or not process_alive(pid):
        return None
    try:
        user = pwd.getpwuid(owner).pw_name
    except KeyError:
        user = str(owner)
    return RunningCluster(pid, str(spec.get("data_dir", "")), str(spec.get("api_listen", "")), user)


@contextlib.contextmanager
def exclusive(data: Path) -> Iterator[None]:
    """Serialise `cara up` and `cara down` of one data directory (a lock file; children never inherit it)."""
    data.mkdir(parents=True, exist_ok=True)
    with open(data / LOCK_FILE, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def docker_ping(url: str, timeout: float = 5.0) -> str | None:
    """None when the Docker engine at `url` (unix:// or tcp://) answers GET /_ping with 200, else what went wrong."""
    try:
        address = parse_docker_host(url)
        if isinstance(address, UnixSocket):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(address.path)
            except OSError:
                sock.close()
                raise
        else:
            sock = socket.create_connection(address, timeout)
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = sock.recv(256)
    except PermissionError:
        return "permission denied"
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc)
    status = reply.split(b"\r\n", 1)[0].split()
    return None if len(status) >= 2 and status[1] == b"200" else f"unexpected answer {reply[:40]!r}"


def docker_problem(url: str) -> str | None:
    """None when the agent can use Docker at `url`, else a one-line message saying what to install or start."""
    problem = docker_ping(url)
    if problem is None:
        return None
    if shutil.which("docker") is None and shutil.which("dockerd") is None:
        return DOCKER_MISSING
    if problem == "permission denied":
        return f"cannot use the Docker engine at {url}: permission denied (run as root or join the docker group)"
    return (
        f"no Docker engine answers at {url} ({problem}): start it (systemctl start docker, or "
        "scripts/start-dockerd.sh in a clone of Caravanserai), or run `cara up --no-agent`"
    )


async def probe(address: str, node: str | None, tls: TLSFiles | None = None) -> str:
    """An empty string when the API at `address` answers (and `node`, if any, is Ready), else what is missing.
    `tls`: the admin's files of a cluster that requires client certificates.

    One attempt, a few seconds at most."""
    try:
        async with Client(address, tls=tls, timeout=3, retry_timeout=0) as c:
            await c.projects.list(limit=1)
            if node is None:
                return ""
            n = await c.nodes.get(node)
            if n.status.state != v1.NODE_READY:
                return f"node {node} is {n.status.state or 'not Ready'}"
    except NotFound:
        return f"node {node} has not registered yet"
    except CaravanseraiError as exc:
        return str(exc)
    return ""


async def wait_ready(address: str, node: str | None, timeout: float, tls: TLSFiles | None = None) -> str:
    """Probe until the cluster answers: an empty string once it does, else the last problem seen in `timeout` s."""
    deadline = time.monotonic() + timeout
    problem = "the API server did not answer"
    while time.monotonic() < deadline:
        problem = await probe(address, node, tls)
        if not problem:
            return ""
        await asyncio.sleep(0.5)
    return problem


def default_node_name() -> str:
    """The host name's first label, lower case."""
    return socket.gethostname().split(".")[0].lower()


def command_name(program: str) -> str:
    """How to call `program` (caractrl, cara) from here: its name when it is on PATH, else its path beside us."""
    if shutil.which(program):
        return program
    beside = Path(sys.argv[0]).parent / program
    if not beside.is_file():
        return program
    relative = os.path.relpath(beside)
    return relative if not relative.startswith("..") else str(beside.resolve())


__all__ = [
    "DEFAULT_ETCD_PORT",
    "DOCKER_MISSING",
    "ETCD_MISSING",
    "LOCK_FILE",
    "RunningCluster",
    "State",
    "command_name",
    "default_data_dir",
    "default_node_name",
    "docker_ping",
    "docker_problem",
    "exclusive",
    "leftover_processes",
    "port_problem",
    "probe",
    "read_state",
    "running_clusters",
    "stop_processes",
    "wait_ready",
]
