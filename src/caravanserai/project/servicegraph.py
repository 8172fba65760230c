"""A project's services as a graph of `dependsOn` edges, and their health check settings. Pure functions.

* `CONDITIONS`: what a dependency may wait for — `started` (the default: the container runs), `healthy` (its
  health check passes) or `completed` (it exited with code 0 and will not be restarted).
* `find_cycle(spec)`: the services of one dependency cycle in order (empty when there is none), so validation
  can name the field that closes it.
* `HealthSettings.of(check)`: a health check's durations (seconds) and retries with the defaults applied:
  interval 10s, timeout 5s, retries 3, start period 0s.

Shared by the apiserver (validation), the agent (start order, probes) and the CLI (describe).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.text.durations import parse_duration

STARTED = "started"
HEALTHY = "healthy"
COMPLETED = "completed"
CONDITIONS = (STARTED, HEALTHY, COMPLETED)

DEFAULT_INTERVAL = "10s"
DEFAULT_TIMEOUT = "5s"
DEFAULT_RETRIES = 3
DEFAULT_START_PERIOD = "0s"
DEFAULT_EXPECTED_STATUS = "200-399"


def condition(dep: v1.ServiceDependency) -> str:
    """The dependency's condition with the default applied."""
    return dep.condition or STARTED


def edges(spec: v1.ProjectSpec) -> Mapping[str, tuple[str, ...]]:
    """Service name → the names it depends on (unknown names included, as written)."""
    return {s.name: tuple(d.service for d in s.depends_on) for s in spec.services}


def find_cycle(spec: v1.ProjectSpec) -> list[str]:
    """The services of one dependency cycle, in order (`[a, b]` for a → b → a); empty when there is none."""
    graph = edges(spec)
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for dep in graph.get(name, ()):
            if dep == name:
                continue  # a self-reference is refused on its own, not as a cycle
            if state.get(dep) == 1:
                return path[path.index(dep) :]
            if dep in graph and dep not in state:
                found = visit(dep)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return []

    for name in graph:
        if name not in state:
            found = visit(name)
            if found:
                return found
    return []


def parse_status_range(text: str) -> tuple[int, int]:
    """`"204"` → (204, 204); `"200-399"` → (200, 399). Raises ValueError for anything else."""
    low, sep, high = (text or DEFAULT_EXPECTED_STATUS).partition("-")
    try:
        first, last = int(low), int(high) if sep else int(low)
    except ValueError:
        raise ValueError(f"must be a status code or range such as 200-399, not {text!r}") from None
    if not 100 <= first <= last <= 599:
        raise ValueError(f"must be codes between 100 and 599, low to high, not {text!r}")
    return first, last


@dataclass(frozen=True, slots=True)
class HealthSettings:
    """A health check's timing with defaults applied (seconds)."""

    interval: float
    timeout: float
    retries: int
    start_period: float

    @classmethod
    def of(cls, check: v1.HealthCheck) -> HealthSettings:
        """Settings of a validated check (ValueError for a duration validation would have refused)."""
        return cls(
            interval=parse_duration(check.interval or DEFAULT_INTERVAL),
            timeout=parse_duration(check.timeout or DEFAULT_TIMEOUT),
            retries=check.retries or DEFAULT_RETRIES,
            start_period=parse_duration(check.start_period or DEFAULT_START_PERIOD),
        )


__all__ = [
    "COMPLETED",
    "CONDITIONS",
    "DEFAULT_EXPECTED_STATUS",
    "DEFAULT_INTERVAL",
    "DEFAULT_RETRIES",
    "DEFAULT_START_PERIOD",
    "DEFAULT_TIMEOUT",
    "HEALTHY",
    "HealthSettings",
    "STARTED",
    "condition",
    "edges",
    "find_cycle",
    "parse_status_range",
]
