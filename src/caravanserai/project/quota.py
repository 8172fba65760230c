"""What a project costs its namespace's quota, and whether it fits: one reading for the apiserver (which counts
usage in the same transaction as the write) and the queue controller (which admits waiting projects).

* **Usage** of a project is the sum of its services' requests (cpu in millicores, memory and extended resources
  such as `nvidia.com/gpu` in whole units; an extended resource with only a limit requests its limit, as
  `project.grants` reads it) plus one `projects`.
* **Counted** are the projects of the namespace that hold their share: every phase but Queued (waiting),
  Succeeded, Failed and Terminated (done), and not yet removed.
* **Fits** when, for every resource the quota limits, used + usage ≤ hard; a resource the quota does not name is
  not limited. Only growth is judged: a write that keeps or lowers a project's usage always passes, so a quota
  lowered below current use stops new work, never existing work.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from caravanserai import v1
from caravanserai.project.grants import STANDARD_RESOURCES
from caravanserai.text.quantity import cpu_millis, format_bytes, format_cpu, to_int

PROJECTS = "projects"
CPU, MEMORY = "cpu", "memory"
UNCOUNTED_PHASES = frozenset({v1.QUEUED, v1.SUCCEEDED, v1.FAILED, v1.TERMINATED})

Amounts = dict[str, int]


@functools.lru_cache(maxsize=4096)
def amount(resource: str, quantity: str) -> int:
    """The integer amount of `quantity` (millicores for cpu). ValueError for an unparsable quantity. Remembered
    (a pure function of two strings: every project write and queue pass reads the same few quantities)."""
    return cpu_millis(quantity) if resource == CPU else to_int(quantity)


def show(resource: str, value: int) -> str:
    """An amount as a quantity people read ("3500m" cpu as "3.5", bytes as "8Gi")."""
    if resource == CPU:
        return format_cpu(value)
    if resource == MEMORY:
        return format_bytes(value)
    return str(value)


def usage(project: v1.Project) -> Amounts:
    """What `project` takes from its quota (module docstring)."""
    total: Amounts = {PROJECTS: 1}
    for service in project.spec.services:
        resources = service.resources
        names = set(resources.requests) | {n for n in resources.limits if n not in STANDARD_RESOURCES}
        for name in names:
            text = resources.requests.get(name) or resources.limits[name]
            total[name] = total.get(name, 0) + amount(name, text)
    return total


def counted(project: v1.Project | None) -> bool:
    """Does `project` (None: absent) hold its share of the quota now?"""
    return project is not None and project.status.phase not in UNCOUNTED_PHASES


def charged(project: v1.Project | None) -> Amounts:
    """`usage(project)` when it is counted, else nothing."""
    return usage(project) if project is not None and counted(project) else {}


def parse(quantities: Mapping[str, str]) -> Amounts:
    """A quota's map of quantities as amounts (unparsable entries are left out: validation refuses them)."""
    out: Amounts = {}
    for name, text in quantities.items():
        try:
            out[name] = amount(name, text)
        except ValueError:
            continue
    return out


def render(amounts: Mapping[str, int], names: Iterable[str]) -> dict[str, str]:
    """`amounts` as quantities, for every name of `names` (0 when absent)."""
    return {name: show(name, amounts.get(name, 0)) for name in names}


def shortfall(used: Mapping[str, int], delta: Mapping[str, int], hard: Mapping[str, int]) -> list[str]:
    """The limits `delta` (added to `used`) would exceed, each as "team uses 3.5 of 4 cpu" reads: ("cpu", used,
    hard) rendered by the caller; here "cpu: 3.5 used of 4, asks 1"; empty when it fits. Only growth counts."""
    missing = []
    for name, limit in sorted(hard.items()):
        grows = delta.get(name, 0)
        if grows > 0 and used.get(name, 0) + grows > limit:
            missing.append(
                f"{show(name, used.get(name, 0))} of {show(name, limit)} {name} used, asks {show(name, grows)}"
            )
    return missing


def over(used: Mapping[str, int], hard: Mapping[str, int]) -> Amounts:
    """What `used` exceeds of each limit of `hard` (what a namespace borrows from its cohort); zero entries left
    out."""
    out = {name: used.get(name, 0) - limit for name, limit in hard.items()}
    return {name: value for name, value in out.items() if value > 0}


def set_borrowed(status: v1.ResourceQuotaStatus, used: Mapping[str, int], hard: Mapping[str, int]) -> None:
    """Write `over(used, hard)` into `status.borrowed` as quantities (the map is emptied first)."""
    status.borrowed.clear()
    status.borrowed.update({name: show(name, value) for name, value in over(used, hard).items()})


def difference(before: Mapping[str, int], after: Mapping[str, int]) -> Amounts:
    """after − before, per resource (zero entries left out)."""
    out = {name: after.get(name, 0) - before.get(name, 0) for name in set(before) | set(after)}
    return {name: value for name, value in out.items() if value}


__all__ = [
    "PROJECTS",
    "UNCOUNTED_PHASES",
    "Amounts",
    "amount",
    "charged",
    "counted",
    "difference",
    "over",
    "parse",
    "render",
    "set_borrowed",
    "shortfall",
    "show",
    "usage",
]
