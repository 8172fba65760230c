"""The knobs of a soak run (`SoakConfig`) and the duration syntax of `--duration`/`SOAK_DURATION` (`90s`, `5m`, `1h`,
or plain seconds)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from support.soak.sampler import Limits

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str) -> float:
    """`90`, `90s`, `5m`, `1h` → seconds. ValueError naming the text otherwise."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"duration {text!r}: expected a number with an optional unit s, m or h (e.g. 5m)")
    return float(match.group(1)) * _UNIT[match.group(2)]


@dataclass(frozen=True, slots=True)
class SoakConfig:
    """What a soak run does and the bounds its invariants hold it to. Durations in seconds.

    * `duration`: how long faults are injected and the workload runs (then everything is healed and the run waits
      for convergence).
    * `fault_interval`: a fault starts every uniform(min, max) seconds; `fault_kinds` limits the kinds (empty: all).
    * `max_faults`: stop injecting after this many (0: no limit; the smoke test uses 2 or 3).
    * `max_overlap`: the fence bound: the longest time two running copies of one service may overlap when the
      project moved without a hand-off (node health moved it off a node it no longer heard from).
    * `fence_slack`: how long past its node's fence deadline (Lease renew time + `--fence-after`) a container may
      be seen running (the engines' kill and the sampling's own latency).
    * `handoff_bound`: how long a hand-off's old copy may run after its new copy is ready, while the old node's
      agent runs.
    * `convergence_bound`: every project matches its spec within this long after the last fault ends.
    * `leaks`: what counts as a memory or file-descriptor leak (`sampler.Limits`: warm-up, the window a process
      must be watched for to be judged, slope limits and growth floors).
    """

    duration: float = 1800.0
    seed: int | None = None
    workers: int = 4
    heartbeat_timeout: float = 5.0
    grace_period: float = 5.0
    fault_interval: tuple[float, float] = (20.0, 60.0)
    fault_kinds: tuple[str, ...] = ()
    max_faults: int = 0
    pause_for: float = 10.0
    op_interval: tuple[float, float] = (1.0, 3.0)
    max_projects: int = 10
    max_overlap: float = 5.0
    fence_slack: float = 2.0
    handoff_bound: float = 5.0
    convergence_bound: float = 120.0
    sample_interval: float = 1.0
    resource_interval: float = 5.0
    leaks: Limits = field(default_factory=Limits)

    @property
    def cut_for(self) -> tuple[float, float]:
        """How long a link stays cut: longer than the heartbeat timeout (the node goes NotReady), sometimes
        longer than timeout + grace (its projects move)."""
        return (self.heartbeat_timeout + 2.0, self.heartbeat_timeout + self.grace_period + 5.0)


__all__ = ["SoakConfig", "parse_duration"]
