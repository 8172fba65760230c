"""A NodeGroup's settings as plain values (`GroupSettings`), with the defaults its proto documents applied, and the
node a scale-up of the group would add as the scheduler sees nodes (`template_node`).

The template node is a `NodeInfo`, the record the scheduler's filters judge: labels (the template's plus the
group's label), taints, allocatable (the template's, or its capacity when no allocatable is given), Ready (its
Lease renewed `now`) and not cordoned. A simulation that runs `filters.FILTERS` against it decides exactly as the
scheduler will once the node has registered with that template.
"""

from __future__ import annotations

from dataclasses import dataclass

from caravanserai import v1
from caravanserai.controllers.scheduler.resources import Resources, parse_resources
from caravanserai.controllers.scheduler.snapshot import NO_SCHEDULE, NodeInfo, TaintInfo
from caravanserai.text.durations import parse_duration

DEFAULT_IDLE_TIME = 600.0
DEFAULT_UTILIZATION_THRESHOLD = 0.5
DEFAULT_REGISTER_TIMEOUT = 600.0
DEFAULT_PROVIDER_TIMEOUT = 60.0


def duration_or(text: str, default: float) -> float:
    """`text` as seconds, `default` when empty (the apiserver has refused any other text)."""
    return parse_duration(text) if text else default


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What the autoscaler reads of one group's spec."""

    name: str
    min_size: int
    max_size: int
    priority: int
    labels: dict[str, str]
    taints: tuple[TaintInfo, ...]
    allocatable: Resources
    scale_down: bool
    idle_time: float
    utilization_threshold: float
    register_timeout: float


def settings_of(group: v1.NodeGroup) -> GroupSettings:
    """The settings of `group`, defaults applied."""
    spec = group.spec
    template = spec.template
    labels = {**template.labels, v1.LABEL_NODE_GROUP: group.metadata.name}
    taints = tuple(TaintInfo(t.key, t.value, t.effect or NO_SCHEDULE) for t in template.taints)
    down = spec.scale_down
    threshold = down.utilization_threshold if down.HasField("utilization_threshold") else DEFAULT_UTILIZATION_THRESHOLD
    return GroupSettings(
        name=group.metadata.name,
        min_size=spec.min_size,
        max_size=spec.max_size,
        priority=spec.priority,
        labels=labels,
        taints=taints,
        allocatable=parse_resources(template.allocatable or template.capacity),
        scale_down=not down.disabled,
        idle_time=duration_or(down.idle_time, DEFAULT_IDLE_TIME),
        utilization_threshold=threshold,
        register_timeout=duration_or(spec.register_timeout, DEFAULT_REGISTER_TIMEOUT),
    )


def template_node(settings: GroupSettings, name: str, *, now: float) -> NodeInfo:
    """A fresh, empty node of the group named `name`, Ready at `now` (see the module docstring)."""
    return NodeInfo(
        name,
        labels=dict(settings.labels),
        taints=settings.taints,
        allocatable=dict(settings.allocatable),
        renew_time=now,
    )


__all__ = [
    "DEFAULT_IDLE_TIME",
    "DEFAULT_PROVIDER_TIMEOUT",
    "DEFAULT_REGISTER_TIMEOUT",
    "DEFAULT_UTILIZATION_THRESHOLD",
    "GroupSettings",
    "duration_or",
    "settings_of",
    "template_node",
]
