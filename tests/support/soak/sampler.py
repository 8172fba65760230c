"""RSS and open file descriptors of every process of the fleet (and the etcd members' database sizes), sampled
over the run, and the leak verdict.

A process restarted by a fault gets a new pid: samples are kept per *incarnation* (name, pid).

**What counts as a leak: growth that does not flatten.** Every bounded structure of the fleet fills before it
levels off: the apiservers' watch histories and etcd's history hold one to two compaction intervals of changes
(the apiservers compact every 5 minutes, keeping one interval), etcd's raft log in memory fills until its
snapshot count. So a process is judged only on its samples after `Limits.warmup` seconds from its first one
(two compaction intervals and a minute by default), and only on the *late* half of those: the least-squares line
through the samples of the last half of the judged span. A leak is late growth that is both

* steep: the late slope is above the limit (`Limits.rss_slope` MiB, `Limits.fd_slope` fds, per hour), and
* large: the late line rises by more than the floor over the late span (`Limits.rss_floor` MiB,
  `Limits.fd_floor` fds: a few cached pages or sockets, or a garbage collector's step, are not a leak).

Growth that fills and stops (early slope high, late slope low) passes; growth that goes on at the same pace
fails. The figures reported for each incarnation are the ones it was judged by: RSS and fds at the start, at the
end of warm-up and at the end, the early and late slopes, and the RSS once a minute.

For an etcd member RSS is not the whole story: its database file is mapped into its memory, so RSS follows the
file's size, which compaction does not shrink (freed pages are reused; only defragmentation returns them). The
member's *database in use* (`db_size_in_use`, what compaction bounds) is sampled too and judged by the same rule
with the RSS limits; the file size is reported beside it, and the raft entries per second (the raft log a member
holds in memory fills to its `--snapshot-count` at that pace).

An incarnation watched for less than `Limits.window` seconds after warm-up (killed soon after it started, or a
short run) is not judged: its late slopes are reported as null. Processes named with a prefix of
`Limits.figures_only` (the hosts' Docker Engines: their fds and memory follow the number of containers the
workload has on them, which climbs as projects accumulate) are reported but not judged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

MIN_SAMPLES = 6
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024

Points = list[tuple[float, float]]


def read_usage(pid: int) -> tuple[float, int] | None:
    """(RSS in MiB, open fd count) of `pid` from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            rss_pages = int(statm.read().split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError, IndexError):
        return None
    return rss_pages * PAGE / MIB, fds


def slope_per_hour(points: Points) -> float:
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


def late_half(points: Points) -> Points:
    """The points of the last half of the span `points` cover (by time)."""
    if not points:
        return []
    middle = (points[0][0] + points[-1][0]) / 2
    return [p for p in points if p[0] >= middle]


def leaking(points: Points, slope_limit: float, floor: float) -> bool:
    """Whether (seconds, value) points still grow in their late half: steeper than `slope_limit` per hour and by
    more than `floor` over that half."""
    late = late_half(points)
    if len(late) < 2:
        return False
    slope = slope_per_hour(late)
    rise = slope * (late[-1][0] - late[0][0]) / 3600.0
    return slope > slope_limit and rise > floor


@dataclass(frozen=True, slots=True)
class Limits:
    """What counts as a leak; see the module docstring. Seconds, MiB, fds; slopes per hour."""

    warmup: float = 660.0
    window: float = 300.0
    rss_slope: float = 30.0
    fd_slope: float = 30.0
    rss_floor: float = 8.0
    fd_floor: float = 8.0
    figures_only: tuple[str, ...] = ("dockerd-",)


@dataclass(slots=True)
class Incarnation:
    """One run of one process: (monotonic time, RSS MiB, fds) samples, and for an etcd member (monotonic time,
    database file MiB, database in use MiB, raft index) samples."""

    name: str
    pid: int
    samples: list[tuple[float, float, int]] = field(default_factory=list)
    db_samples: list[tuple[float, float, float, int]] = field(default_factory=list)

    def figures(self, limits: Limits) -> dict[str, object]:
        """The figures the incarnation is judged by (see the module docstring) and whether it leaks."""
        first, last = self.samples[0], self.samples[-1]
        start = first[0] + limits.warmup
        used = [s for s in self.samples if s[0] >= start]
        watched = len(used) >= MIN_SAMPLES and used[-1][0] - used[0][0] >= limits.window
        judged = watched and not self.name.startswith(limits.figures_only)
        rss = [(t, r) for t, r, _ in used]
        fds = [(t, float(f)) for t, _, f in used]
        out: dict[str, object] = {
            "pid": self.pid,
            "samples": len(self.samples),
            "seconds": round(last[0] - first[0], 1),
            "rss_mib_start": round(first[1], 1),
            "rss_mib_after_warmup": round(used[0][1], 1) if used else None,
            "rss_mib_end": round(last[1], 1),
            "rss_mib_max": round(max(s[1] for s in self.samples), 1),
            **_slopes("rss_mib", rss, watched),
            "fds_start": first[2],
            "fds_end": last[2],
            **_slopes("fds", fds, watched),
            "rss_mib_by_minute": _by_minute([(t, r) for t, r, _ in self.samples]),
            "judged": judged,
            "rss_leak": judged and leaking(rss, limits.rss_slope, limits.rss_floor),
            "fd_leak": judged and leaking(fds, limits.fd_slope, limits.fd_floor),
        }
        if self.db_samples:
            out.update(self._db_figures(limits, start, judged))
        return out

    def _db_figures(self, limits: Limits, start: float, judged: bool) -> dict[str, object]:
        first, last = self.db_samples[0], self.db_samples[-1]
        in_use = [(t, u) for t, _, u, _ in self.db_samples if t >= start]
        watched = len(in_use) >= MIN_SAMPLES and in_use[-1][0] - in_use[0][0] >= limits.window
        return {
            "db_mib_start": round(first[1], 1),
            "db_mib_end": round(last[1], 1),
            "db_in_use_mib_start": round(first[2], 1),
            "db_in_use_mib_end": round(last[2], 1),
            **_slopes("db_in_use_mib", in_use, watched),
            "db_in_use_mib_by_minute": _by_minute([(t, u) for t, _, u, _ in self.db_samples]),
            "raft_entries_per_s": round((last[3] - first[3]) / (last[0] - first[0]), 1) if last[0] > first[0] else None,
            "db_leak": judged and watched and leaking(in_use, limits.rss_slope, limits.rss_floor),
        }


def _slopes(name: str, points: Points, watched: bool) -> dict[str, float | None]:
    """Early and late slopes (per hour) of the judged points: the first and the last half of their span."""
    late = late_half(points)
    early = points[: len(points) - len(late) + 1]
    return {
        f"{name}_per_hour_early": round(slope_per_hour(early), 1) if watched else None,
        f"{name}_per_hour_late": round(slope_per_hour(late), 1) if watched else None,
    }


def _by_minute(points: Points) -> list[float]:
    """The value at (about) every whole minute since the first point: the shape of the curve, for the reader."""
    out: list[float] = []
    if not points:
        return out
    next_at = points[0][0]
    for t, value in points:
        if t >= next_at:
            out.append(round(value, 1))
            next_at += 60.0
    return out


class ResourceSampler:
    """Samples every process `processes()` names (name → pid, None while it is down) on each `sample(now)`;
    `record_db` adds an etcd member's database sizes to its current incarnation."""

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

    def record_db(self, name: str, pid: int, now: float, db_bytes: int, in_use_bytes: int, raft_index: int) -> None:
        run = self.incarnations.get((name, pid))
        if run is not None:
            run.db_samples.append((now, db_bytes / MIB, in_use_bytes / MIB, raft_index))

    def report(self, limits: Limits) -> dict[str, list[dict[str, object]]]:
        """name → the figures of each of its incarnations, in start order."""
        out: dict[str, list[dict[str, object]]] = {}
        for run in sorted(self.incarnations.values(), key=lambda r: (r.name, r.samples[0][0])):
            out.setdefault(run.name, []).append(run.figures(limits))
        return out


__all__ = ["Incarnation", "Limits", "ResourceSampler", "late_half", "leaking", "read_usage", "slope_per_hour"]
