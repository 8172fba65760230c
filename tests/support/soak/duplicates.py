"""The soak's judgement of duplicates: three verdicts, one per documented guarantee (docs/fleet.md, "What happens
when a machine goes away"), from the observer's overlap episodes and fence lateness and the faults injected.

* **Unplanned duplicates** (`unplanned_line`): a project moved without a hand-off (node health, off a node it no
  longer hears from) never runs on two hosts for longer than `max_overlap`: the fence (the agent's, else the
  node's watchdog) stops the old copy by the moment of the move.
* **Fence deadlines** (`fence_line`): no container runs on a node more than `fence_slack` past the node's Lease
  renew time plus `--fence-after`, whatever happened to its agent.
* **Hand-offs** (`handoff_line`): a planned move's old copy stops within `handoff_bound` of the hand-off's end (the
  new copy ready) while the old node's agent runs. A hand-off whose old node's agent was out (paused, killed or cut
  off) between the hand-off's end and `AGENT_RECOVERY` seconds after the fault is excused here: the old agent
  cannot end it, and its copy is held to the fence deadline (the line above) instead.
"""

from __future__ import annotations

from typing import Any

from support.soak.config import SoakConfig
from support.soak.faults import FaultEvent
from support.soak.fencecheck import FenceCheck
from support.soak.overlaps import Overlap
from support.soak.verdict import line

AGENT_RECOVERY = 20.0
"""Seconds an agent back from a fault (resumed, restarted, reconnected) may take to act again: start-up, relist,
reconcile, on a loaded machine."""
OUT_KINDS = ("pause", "kill-agent", "cut")
EXAMPLES = 5


def agent_out(event: FaultEvent, host: str) -> bool:
    """Whether `event` took the agent of `host` out (froze or killed it, or cut its host off)."""
    if event.kind == "cut":
        return event.target == host
    return event.kind in OUT_KINDS and event.target == f"agent-{host}"


def excused(episode: Overlap, events: list[FaultEvent], wall_offset: float) -> bool:
    """Whether the old host's agent of a hand-off was out at some time between the hand-off's end and the old
    copy's finish (events are on the monotonic clock; `wall_offset` = wall − monotonic)."""
    if episode.handed_over is None:
        return False
    begin, end = episode.handed_over, episode.old_finished or episode.handed_over
    for event in events:
        if not agent_out(event, episode.old_host):
            continue
        out_from, out_to = event.start + wall_offset, (event.end or event.start) + wall_offset + AGENT_RECOVERY
        if out_from <= end and out_to >= begin:
            return True
    return False


def _episode(o: Overlap, origin: float) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "project": o.project, "service": o.service, "hosts": o.hosts, "old_host": o.old_host or None,
        "cause": "hand-off" if o.handoff else "unplanned", "at_s": round(o.start - origin, 1),
        "seconds": round(o.seconds, 1), "sampled_s": round(o.sampled, 1),
        "from": "sampled" if o.measured is None else "engine times",
    }  # fmt: skip
    if o.handoff_late is not None:
        entry["after_handoff_s"] = round(o.handoff_late, 1)
    entry["ran_before_on"] = sorted(o.before)  # how the episode was classified: the hosts before it began,
    entry["handoff_from_seen"] = sorted(o.handoff_hosts)  # and the previousNodeRef values seen around it
    return entry


def duplicates_section(
    overlaps: list[Overlap], fence: FenceCheck, events: list[FaultEvent], config: SoakConfig, origin: float,
    wall_offset: float,
) -> tuple[dict[str, Any], list[dict[str, object]]]:  # fmt: skip
    """The report's `duplicates` figures and the three verdict lines (see the module docstring)."""
    ranked = sorted(overlaps, key=lambda o: -o.seconds)
    unplanned = [o for o in ranked if not o.handoff]
    handoffs = [o for o in ranked if o.handoff]
    measured = [o for o in handoffs if o.handoff_late is not None]
    judged = [o for o in measured if not excused(o, events, wall_offset)]
    late_handoffs = sorted(judged, key=lambda o: -(o.handoff_late or 0.0))
    worst_unplanned = unplanned[0].seconds if unplanned else 0.0
    worst_handoff = late_handoffs[0].handoff_late or 0.0 if late_handoffs else 0.0
    late = fence.worst
    worst_late = late[0].late if late else 0.0
    section = {
        "overlap_max_s": round(ranked[0].seconds, 1) if ranked else 0.0,
        "episodes": len(ranked),
        "unplanned": {"episodes": len(unplanned), "overlap_max_s": round(worst_unplanned, 1),
                      "bound_s": config.max_overlap},
        "handoffs": {"episodes": len(handoffs), "overlap_max_s": round(handoffs[0].seconds, 1) if handoffs else 0.0,
                     "judged": len(judged), "excused_agent_out": len(measured) - len(judged),
                     "unmeasured": len(handoffs) - len(measured),
                     "after_handoff_max_s": round(worst_handoff, 1), "bound_s": config.handoff_bound},
        "fence": {"late_max_s": round(worst_late, 2), "containers_late": len(late), "slack_s": config.fence_slack,
                  "checked_snapshots": fence.checked, "silences_seen": len(fence.silences),
                  "worst": [{"host": x.host, "project": x.project, "late_s": round(x.late, 1),
                             "deadline_at_s": round(x.deadline - wall_offset - origin, 1)}
                            for x in late[:EXAMPLES]]},
        "worst": [_episode(o, origin) for o in ranked[:EXAMPLES]],
    }  # fmt: skip
    over = [o for o in unplanned if o.seconds > config.max_overlap]
    slow = [o for o in late_handoffs if (o.handoff_late or 0.0) > config.handoff_bound]
    past = [x for x in late if x.late > config.fence_slack]
    lines = [
        line("no duplicate container beyond the fence bound", round(worst_unplanned, 1),
             f"<= {config.max_overlap:g}s", not over,
             "; ".join(f"{o.project}/{o.service} on {o.hosts} for {o.seconds:.1f}s" for o in over[:3])
             or f"{len(unplanned)} unplanned episodes (moves without a hand-off)"),
        line("no container runs past its node's fence deadline", round(worst_late, 2), f"<= {config.fence_slack:g}s",
             not past, "; ".join(f"{x.project} on {x.host} {x.late:.1f}s late" for x in past[:3])
             or f"{fence.checked} snapshots checked against every node's Lease, {len(fence.silences)} deadlines "
             "seen passing"),
        line("a hand-off's old copy goes once the new one is ready", round(worst_handoff, 1),
             f"<= {config.handoff_bound:g}s", not slow,
             "; ".join(f"{o.project} on {o.old_host} {o.handoff_late:.1f}s after its hand-off" for o in slow[:3])
             or f"{len(judged)} hand-offs judged, {len(measured) - len(judged)} excused (old agent out), "
             f"{len(handoffs) - len(measured)} unmeasured"),
    ]  # fmt: skip
    return section, lines


__all__ = ["AGENT_RECOVERY", "agent_out", "duplicates_section", "excused"]
