"""Project status changes that more than one controller makes, as pure functions returning a copy to store.

* `return_to_pending`: Scheduled/Running → Pending: node_ref cleared, NotReadyAt removed, Scheduled=False and
  the Phase condition with the given reason (NodeNotReady, NodeDeleted …), so the scheduler places it again.
* `force_terminated`: Terminating → Terminated without the agent (its node is dead or gone), with the reason.

The cached project passed in is never changed.
"""

from __future__ import annotations

from caravanserai import meta, v1


def return_to_pending(project: v1.Project, *, reason: str, message: str, now: float) -> v1.Project:
    """A copy of `project` back in Pending, unbound, with `reason` and `message` on its conditions."""
    out = meta.copy(project)
    out.status.node_ref = ""
    meta.remove_condition(out.status.conditions, v1.CONDITION_NOT_READY_AT)
    meta.set_condition(out.status.conditions, v1.CONDITION_SCHEDULED, v1.FALSE, reason=reason, message=message, now=now)
    meta.set_phase(out, v1.PENDING, reason=reason, message=message, now=now)
    return out


def force_terminated(project: v1.Project, *, reason: str, message: str, now: float) -> v1.Project:
    """A copy of a Terminating `project` marked Terminated with `reason` and `message`."""
    out = meta.copy(project)
    meta.remove_condition(out.status.conditions, v1.CONDITION_NOT_READY_AT)
    meta.set_phase(out, v1.TERMINATED, reason=reason, message=message, now=now)
    return out


__all__ = ["force_terminated", "return_to_pending"]
