"""Extended resources of a node: counts given with `cara-agent --resource NAME=COUNT` and GPUs found by
`nvidia-smi`, plus the labels every agent puts on its Node.

Guarantees:

* **Declared wins over detected.** `--resource nvidia.com/gpu=1` overrides what `nvidia-smi` reports.
* **Detection never fails registration**: without `nvidia-smi` on PATH, or when it fails or hangs (5 s), no GPU is
  reported.
* `NVIDIA_GPU` (`nvidia.com/gpu`) is the resource a container turns into a Docker device request
  (`containers.ContainerCreate`, `gpus`).
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Mapping

from caravanserai.agent.docker.containers import NVIDIA_GPU
from caravanserai.text.selectors import validate_label_key

LABEL_HOSTNAME = "caravanserai.io/hostname"
LABEL_OS = "caravanserai.io/os"
LABEL_ARCH = "caravanserai.io/arch"
NODE_LABEL_PREFIX = "node.caravanserai.io/"
"""The node's own labels (NodeRestriction, `apiserver/kinds/node.py`): the agent may change them at any time."""
ADMIN_NAMESPACE = "caravanserai.io"


def node_owned_label(key: str) -> bool:
    """Whether the agent may set, change or remove `key` on an existing Node (the apiserver's rule)."""
    return key.startswith(NODE_LABEL_PREFIX) or key in (LABEL_HOSTNAME, LABEL_OS, LABEL_ARCH)


def admin_label(key: str) -> bool:
    """Whether only an admin may set `key`, even at registration: the caravanserai.io namespace."""
    prefix = key.partition("/")[0] if "/" in key else ""
    return (prefix == ADMIN_NAMESPACE or prefix.endswith("." + ADMIN_NAMESPACE)) and not node_owned_label(key)


_ARCH_NAMES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "i386": "386",
    "i686": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}
NVIDIA_SMI_TIMEOUT = 5.0


def parse_resource(text: str) -> tuple[str, int]:
    """(name, count) of `NAME=COUNT`; ValueError saying what is wrong otherwise."""
    name, sep, count = text.partition("=")
    if not sep or not name:
        raise ValueError(f"invalid resource {text!r}: expected NAME=COUNT, e.g. gpu=2")
    problem = validate_label_key(name)
    if problem:
        raise ValueError(f"invalid resource name {name!r}: {problem}")
    if name in ("cpu", "memory", "disk"):
        raise ValueError(f"invalid resource name {name!r}: {name} is measured by the agent itself")
    if not count.isdigit():
        raise ValueError(f"invalid resource count {count!r} for {name}: must be a whole number")
    return name, int(count)


def nvidia_gpus(command: str = "nvidia-smi") -> int:
    """How many GPUs `nvidia-smi --list-gpus` lists (0 without nvidia-smi or when it fails). Blocking."""
    path = shutil.which(command)
    if path is None:
        return 0
    try:
        done = subprocess.run([path, "--list-gpus"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return 0
    if done.returncode != 0:
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def node_resources(declared: Mapping[str, int], *, nvidia_smi: str = "nvidia-smi") -> dict[str, int]:
    """The extended resources to report: detected GPUs, then `declared` (which wins). Blocking."""
    found: dict[str, int] = {}
    gpus = nvidia_gpus(nvidia_smi)
    if gpus:
        found[NVIDIA_GPU] = gpus
    found.update(declared)
    return found


def automatic_labels(hostname: str) -> dict[str, str]:
    """The labels every agent sets on its Node: host name, operating system and architecture (Go's names, as
    Kubernetes uses: amd64, arm64 …). Values longer than a label allows are cut."""
    arch = platform.machine().lower()
    return {
        LABEL_HOSTNAME: hostname.lower()[:63].strip("-_.") or "unknown",
        LABEL_OS: platform.system().lower() or "unknown",
        LABEL_ARCH: _ARCH_NAMES.get(arch, arch) or "unknown",
    }


__all__ = [
    "ADMIN_NAMESPACE",
    "NODE_LABEL_PREFIX",
    "admin_label",
    "node_owned_label",
    "LABEL_ARCH",
    "LABEL_HOSTNAME",
    "LABEL_OS",
    "automatic_labels",
    "node_resources",
    "nvidia_gpus",
    "parse_resource",
]
