"""Writes of a NodeGroup's status, each a small in-place mutation applied by compare-and-swap
(`client.apply.modify_status`, re-read and re-applied on Conflict).

The order matters and is the autoscaler's crash-safety: a scale-up is **recorded** (`record_scale_up`: the node
names in `provisioning` with `created=false`, the desired size, the decision) before the provider is asked, and
marked `created` after; a restarted autoscaler finds the recorded names and asks for those same names again (the
provider is idempotent per name), never for new ones. A scale-down is recorded (`removing`) before the node is
cordoned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.apply import modify_status
from caravanserai.clock import timestamp

CONDITION_BACKOFF = "Backoff"
CONDITION_UNKNOWN_NODES = "UnknownNodes"

Mutation = Callable[[v1.NodeGroup], bool]


async def write(client: Client, group: v1.NodeGroup, mutate: Mutation) -> v1.NodeGroup:
    """Apply `mutate` to the group's status (starting from `group`, re-read on Conflict); the stored group."""
    stored, _ = await modify_status(client.nodegroups, group.metadata.name, mutate, current=group)
    result: v1.NodeGroup = stored
    return result


def decision(
    now: float, before: int, after: int, reason: str, nodes: Sequence[str], projects: Sequence[str]
) -> v1.ScalingDecision:
    return v1.ScalingDecision(
        time=timestamp(now), from_size=before, to_size=after, reason=reason, nodes=nodes, projects=projects
    )


def record_scale_up(names: Sequence[str], *, now: float, reason: str, projects: Sequence[str]) -> Mutation:
    """Add `names` to provisioning (not created yet), grow `desired`, record the decision."""

    def mutate(group: v1.NodeGroup) -> bool:
        status = group.status
        before = status.desired
        for name in names:
            status.provisioning.add(name=name, requested_at=timestamp(now), created=False)
        status.desired = before + len(names)
        status.last_scale_up.CopyFrom(decision(now, before, status.desired, reason, names, projects))
        return True

    return mutate


def mark_created(names: Sequence[str]) -> Mutation:
    def mutate(group: v1.NodeGroup) -> bool:
        changed = False
        for entry in group.status.provisioning:
            if entry.name in names and not entry.created:
                entry.created = changed = True
        return changed

    return mutate


def forget_provisioning(names: Sequence[str], *, backoff_until: float | None, now: float, why: str = "") -> Mutation:
    """Drop `names` from provisioning and from `desired`; with `backoff_until`, back the group off until then."""

    def mutate(group: v1.NodeGroup) -> bool:
        status = group.status
        kept = [p for p in status.provisioning if p.name not in names]
        dropped = len(status.provisioning) - len(kept)
        del status.provisioning[:]
        status.provisioning.extend(kept)
        status.desired = max(0, status.desired - dropped)
        if backoff_until is not None:
            status.backoff_until.CopyFrom(timestamp(backoff_until))
            meta.set_condition(
                status.conditions, CONDITION_BACKOFF, v1.TRUE, reason="ScaleUpFailed", message=why, now=now
            )
        return dropped > 0 or backoff_until is not None

    return mutate


def record_removal(node: str, projects: Sequence[str], *, now: float) -> Mutation:
    def mutate(group: v1.NodeGroup) -> bool:
        if group.status.HasField("removing"):
            return False
        group.status.removing.CopyFrom(v1.NodeRemoval(node=node, started_at=timestamp(now), projects=projects))
        return True

    return mutate


def finish_removal(node: str, *, now: float, reason: str, removed: bool) -> Mutation:
    """Clear the removal of `node`; when `removed`, record the scale-down decision (desired shrinks by one)."""

    def mutate(group: v1.NodeGroup) -> bool:
        status = group.status
        if not status.HasField("removing") or status.removing.node != node:
            return False
        projects = list(status.removing.projects)
        status.ClearField("removing")
        status.idle_since.pop(node, None)
        if removed:
            before = status.desired
            status.desired = max(0, before - 1)
            status.current = max(0, status.current - 1)
            status.last_scale_down.CopyFrom(decision(now, before, status.desired, reason, [node], projects))
        return True

    return mutate


__all__ = [
    "CONDITION_BACKOFF",
    "CONDITION_UNKNOWN_NODES",
    "Mutation",
    "decision",
    "finish_removal",
    "forget_provisioning",
    "mark_created",
    "record_removal",
    "record_scale_up",
    "write",
]
