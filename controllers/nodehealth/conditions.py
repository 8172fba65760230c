"""The statuses node health writes, as pure functions from a cached object to the object to store (a copy), or
None when nothing would change (so an unchanged verdict is never written again).

Node: state Ready/NotReady with condition Ready (True: reason HeartbeatResumed after an outage, AgentReady for a
node that was never marked NotReady; False: reason HeartbeatTimeout).
Projects: the NotReadyAt condition (True, reason NodeNotReady, transition time = the outage start); removal of
it when the node recovers; the evictions (`caravanserai.project.lifecycle` constructors) with reasons NodeNotReady
and TerminationTimeout.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.clock import rfc3339, timestamp
from caravanserai.project import lifecycle
from caravanserai.text.durations import format_duration

REASON_HEARTBEAT_TIMEOUT = "HeartbeatTimeout"
REASON_HEARTBEAT_RESUMED = "HeartbeatResumed"
REASON_AGENT_READY = "AgentReady"
REASON_NODE_NOT_READY = "NodeNotReady"
REASON_TERMINATION_TIMEOUT = "TerminationTimeout"


def node_marked(node: v1.Node, *, ready: bool, now: float, heartbeat_timeout: float) -> v1.Node | None:
    """`node` with state and Ready condition saying `ready`, or None when it already says so."""
    cond = meta.get_condition(node.status.conditions, v1.CONDITION_READY)
    if ready:
        if node.status.state == v1.NODE_READY and cond is not None and cond.status == v1.TRUE:
            return None
        was_down = cond is not None and cond.reason == REASON_HEARTBEAT_TIMEOUT
        reason = REASON_HEARTBEAT_RESUMED if was_down else REASON_AGENT_READY
        message = "Lease renewed: the agent is heartbeating again" if was_down else "Lease renewed by the agent"
        out = meta.copy(node)
        out.status.state = v1.NODE_READY
        meta.set_condition(out.status.conditions, v1.CONDITION_READY, v1.TRUE, reason=reason, message=message, now=now)
        return out
    if node.status.state == v1.NODE_NOT_READY and cond is not None and cond.status == v1.FALSE:
        return None
    out = meta.copy(node)
    out.status.state = v1.NODE_NOT_READY
    meta.set_condition(
        out.status.conditions,
        v1.CONDITION_READY,
        v1.FALSE,
        reason=REASON_HEARTBEAT_TIMEOUT,
        message=f"No heartbeat (Lease renewal) for {format_duration(heartbeat_timeout)}",
        now=now,
    )
    return out


def project_stamped(project: v1.Project, *, node: str, outage: float, grace_period: float) -> v1.Project:
    """A copy of a Running `project` with NotReadyAt=True whose transition time is the outage start."""
    out = meta.copy(project)
    meta.remove_condition(out.status.conditions, v1.CONDITION_NOT_READY_AT)
    deadline = rfc3339(timestamp(outage + grace_period))
    meta.set_condition(
        out.status.conditions,
        v1.CONDITION_NOT_READY_AT,
        v1.TRUE,
        reason=REASON_NODE_NOT_READY,
        message=f"Node {node} is NotReady; the project returns to Pending at {deadline} unless the node recovers",
        now=outage,
    )
    return out


def project_cleared(project: v1.Project) -> v1.Project | None:
    """A copy of `project` without NotReadyAt, or None when it has none."""
    if meta.get_condition(project.status.conditions, v1.CONDITION_NOT_READY_AT) is None:
        return None
    out = meta.copy(project)
    meta.remove_condition(out.status.conditions, v1.CONDITION_NOT_READY_AT)
    return out


def project_evicted(project: v1.Project, *, node: str, now: float) -> v1.Project:
    """A copy of a Scheduled or Running `project` back in Pending because its node is NotReady."""
    return lifecycle.return_to_pending(
        project,
        reason=REASON_NODE_NOT_READY,
        message=f"Node {node} is NotReady; returned to Pending to be placed on another node",
        now=now,
    )


def project_terminated(project: v1.Project, *, node: str, now: float, terminating_timeout: float) -> v1.Project:
    """A copy of a Terminating `project` forced to Terminated: its node stayed NotReady too long."""
    return lifecycle.terminate(
        project,
        reason=REASON_TERMINATION_TIMEOUT,
        message=f"Node {node} stayed NotReady for {format_duration(terminating_timeout)} while the project was "
        "terminating; marked Terminated without the agent",
        now=now,
    )


__all__ = [
    "REASON_AGENT_READY",
    "REASON_HEARTBEAT_RESUMED",
    "REASON_HEARTBEAT_TIMEOUT",
    "REASON_NODE_NOT_READY",
    "REASON_TERMINATION_TIMEOUT",
    "node_marked",
    "project_cleared",
    "project_evicted",
    "project_stamped",
    "project_terminated",
]
