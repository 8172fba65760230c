"""RSS and open file descriptors of every process of the fleet, sampled over the run, and the leak verdict.

A process restarted by a fault gets a new pid: samples are kept per *incarnation* (name, pid). The slope of an
incarnation is the least-squares line through its samples after `warmup` seconds from its first sample. A leak is
growth that is large, steep and *sustained*, all three:

* the line rises by more than the floor over the window (`Limits.rss_floor` MiB, `Limits.fd_floor` fds: a few
  cached pages or sockets are not a leak);
* its slope is above the limit (`Limits.rss_slope`, `Limits.fd_slope`, per hour);
* the line through the second half of the samples still climbs at half the limit or more (a step after a burst of
  work levels off, a leak keeps climbing).

An incarnation watched for less than `Limits.window` seconds after warm-up (killed soon after it started, or a
short run) is not judged: its slope is reported as null. Processes named with a prefix of `Limits.figures_only`
(the hosts' Docker Engines: their fds and memory follow the number of containers the workload has on them, which
climbs as projects accumulate) are reported but not judged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

MIN_SAMPLES = 6
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def read_usage(pid: int) -> tuple[float, int] | None:
    """(RSS in MiB, open fd count) of `pid` from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            rss_pages = int(statm.read().split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError, IndexError):
        return None
    return rss_pages * PAGE / MIB, fds


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, in value per hour (0 for fewer than two points)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 3600.0


@dataclass(frozen=True, slots=True)
class Limits:
    """What counts as a leak; see the module docstring. Seconds, MiB, fds; slopes per hour."""

    warmup: float = 60.0
    window: float = 120.0
    rss_slope: float = 60.0
    fd_slope: float = 60.0
    rss_floor: float = 16.0
    fd_floor: float = 16.0
    figures_only: tuple[str, ...] = ("dockerd-",)


@dataclass(slots=True)
class Incarnation:
    """One run of one process: (monotonic time, RSS MiB, fds) samples."""

    name: str
    pid: int
    samples: list[tuple[float, float, int]] = field(default_factory=list)

    def after(self, warmup: float) -> list[tuple[float, float, int]]:
        if not self.samples:
            return []
        start = self.samples[0][0] + warmup
        return [s for s in self.samples if s[0] >= start]

    def figures(self, limits: Limits) -> dict[str, object]:
        """Start/end RSS and fds, slopes after warm-up, and whether either is a leak."""
        first, last = self.samples[0], self.samples[-1]
        used = self.after(limits.warmup)
        rss = [(t, r) for t, r, _ in used]
        fds = [(t, float(f)) for t, _, f in used]
        watched = len(used) >= MIN_SAMPLES and used[-1][0] - used[0][0] >= limits.window
        judged = watched and not self.name.startswith(limits.figures_only)
        return {
            "pid": self.pid,
            "samples": len(self.samples),
            "seconds": round(last[0] - first[0], 1),
            "rss_mib_start": round(first[1], 1),
            "rss_mib_end": round(last[1], 1),
            "rss_mib_per_hour": round(slope_per_hour(rss), 1) if watched else None,
            "fds_start": first[2],
            "fds_end": last[2],
            "fds_per_hour": round(slope_per_hour(fds), 1) if watched else None,
            "judged": judged,
            "rss_leak": judged and leaking(rss, limits.rss_slope, limits.rss_floor),
            "fd_leak": judged and leaking(fds, limits.fd_slope, limits.fd_floor),
        }


def leaking(points: list[tuple[float, float]], slope_limit: float, floor: float) -> bool:
    """Whether (seconds, value) points grow past `floor`, steeper than `slope_limit` per hour, and keep climbing."""
    if len(points) < 2:
        return False
    slope = slope_per_hour(points)
    rise = slope * (points[-1][0] - points[0][0]) / 3600.0
    second_half = slope_per_hour(points[len(points) // 2 :])
    return rise > floor and slope > slope_limit and second_half >= slope_limit / 2


class ResourceSampler:
    """Samples every process `processes()` names (name → pid, None while it is down) on each `sample(now)`."""

    def __init__(self, processes: Callable[[], Iterable[tuple[str, int | None]]]) -> None:
        self._processes = processes
        self.incarnations: dict[tuple[str, int], Incarnation] = {}

    def sample(self, now: float) -> None:
        for name, pid in self._processes():
            if pid is None:
                continue
            usage = read_usage(pid)
            if usage is None:
                continue
            run = self.incarnations.setdefault((name, pid), Incarnation(name, pid))
            run.samples.append((now, usage[0], usage[1]))

    def report(self, limits: Limits) -> dict[str, list[dict[str, object]]]:
        """name → the figures of each of its incarnations, in start order."""
        out: dict[str, list[dict[str, object]]] = {}
        for run in sorted(self.incarnations.values(), key=lambda r: (r.name, r.samples[0][0])):
            out.setdefault(run.name, []).append(run.figures(limits))
        return out


__all__ = ["Incarnation", "Limits", "ResourceSampler", "leaking", "read_usage", "slope_per_hour"]
