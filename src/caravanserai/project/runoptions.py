"""How a service's container runs beyond its image and command (the Compose keys of `v1.Service`): the names the
server accepts and the values the agent hands to Docker. Pure; shared by the apiserver's rules and the agent.

* **Capabilities** are Linux capability names, written with or without `CAP_` and in any case, or `ALL`;
  `capability()` gives Docker's form (`CAP_NET_ADMIN`, `ALL`).
* **Signals** are names (`SIGTERM`, or `TERM`), `stop_signal()` gives Docker's form (`SIGTERM`).
* **Ulimits** are Docker's names (`ULIMITS`); -1 means unlimited, and soft must not exceed hard.
* **Sysctls** must be namespaced ones Docker lets a container set (`sysctl_problem()` says why not otherwise):
  `net.*` (not with network mode host: the node's own network namespace), the IPC ones `kernel.shm*`,
  `kernel.msg*`, `kernel.sem` and `fs.mqueue.*`.
* **Stop grace period** (`stop_grace_seconds`): whole seconds, rounded up; None when the service sets none.
* **Host paths** (`host_paths`, `uncovered`): the host directories a project's HostPath volumes bind-mount, and
  which of them a node's allow-list (`NodeStatus.allowed_host_paths`; empty: any) does not cover. A path is
  covered by an entry equal to it or one of its parent directories (compared after normalising `..` and `//`).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Iterable, Sequence

from caravanserai import v1
from caravanserai.text.durations import parse_duration

CAPABILITIES = frozenset(
    {
        "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE", "CHOWN",
        "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
        "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE", "NET_BROADCAST",
        "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT",
        "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME",
        "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM",
    }
)  # fmt: skip
"""Linux capabilities (without `CAP_`), as Docker knows them."""

SIGNALS = (
    "SIGABRT", "SIGALRM", "SIGBUS", "SIGCHLD", "SIGCONT", "SIGFPE", "SIGHUP", "SIGILL", "SIGINT", "SIGIO", "SIGKILL",
    "SIGPIPE", "SIGPROF", "SIGPWR", "SIGQUIT", "SIGSEGV", "SIGSTKFLT", "SIGSTOP", "SIGSYS", "SIGTERM", "SIGTRAP",
    "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGUSR1", "SIGUSR2", "SIGVTALRM", "SIGWINCH", "SIGXCPU", "SIGXFSZ",
)  # fmt: skip
"""Linux signal names a stop signal may be."""

ULIMITS = (
    "as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio",
    "rttime", "sigpending", "stack",
)  # fmt: skip
"""Docker's ulimit names."""

UNLIMITED = -1
"""A ulimit value meaning no limit."""

_IPC_SYSCTLS = frozenset(
    {"kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem", "kernel.shmall", "kernel.shmmax",
     "kernel.shmmni", "kernel.shm_rmid_forced"}
)  # fmt: skip


def capability(name: str) -> str | None:
    """Docker's form of a capability name (`net_admin` → `CAP_NET_ADMIN`, `all` → `ALL`); None when unknown."""
    bare = name.upper().removeprefix("CAP_")
    if bare == "ALL":
        return "ALL"
    return f"CAP_{bare}" if bare in CAPABILITIES else None


def stop_signal(name: str) -> str | None:
    """Docker's form of a signal name (`term` → `SIGTERM`); None when unknown."""
    upper = name.upper()
    full = upper if upper.startswith("SIG") else f"SIG{upper}"
    return full if full in SIGNALS else None


def ulimit_exceeds(soft: int, hard: int) -> bool:
    """Is the soft limit above the hard one (-1: unlimited)?"""
    if hard == UNLIMITED:
        return False
    return soft == UNLIMITED or soft > hard


def sysctl_problem(name: str, *, host_network: bool) -> str | None:
    """Why a container may not set sysctl `name` (None: it may)."""
    if name.startswith("net."):
        if host_network:
            return "net.* sysctls would change the node's own network namespace (networkMode host)"
        return None
    if name in _IPC_SYSCTLS or name.startswith("fs.mqueue."):
        return None
    return "only namespaced sysctls may be set: net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*"


def stop_grace_seconds(service: v1.Service) -> int | None:
    """The service's stop grace period in whole seconds (rounded up), or None when it sets none (or a bad one,
    which the apiserver refuses)."""
    if not service.stop_grace_period:
        return None
    try:
        return math.ceil(parse_duration(service.stop_grace_period))
    except ValueError:
        return None


def host_paths(spec: v1.ProjectSpec) -> list[str]:
    """The host paths of the project's HostPath volumes, in spec order."""
    return [v.host_path for v in spec.volumes if v.type == v1.VOLUME_HOST_PATH and v.host_path]


def covers(allowed: str, path: str) -> bool:
    """Is `path` the allow-list entry `allowed` or under it?"""
    entry, wanted = posixpath.normpath(allowed), posixpath.normpath(path)
    return entry == "/" or wanted == entry or wanted.startswith(entry.rstrip("/") + "/")


def uncovered(paths: Iterable[str], allowed: Sequence[str]) -> list[str]:
    """The `paths` no entry of `allowed` covers (none when `allowed` is empty: any path is allowed)."""
    if not allowed:
        return []
    return [path for path in paths if not any(covers(entry, path) for entry in allowed)]


__all__ = [
    "CAPABILITIES",
    "SIGNALS",
    "ULIMITS",
    "UNLIMITED",
    "capability",
    "covers",
    "host_paths",
    "stop_grace_seconds",
    "stop_signal",
    "sysctl_problem",
    "ulimit_exceeds",
    "uncovered",
]
