"""The scale-up simulation: which Pending projects would fit on new nodes of which group, and how many nodes.

Pure functions over the scheduler's own records (`ProjectInfo`, `NodeInfo`) and filters (`filters.FILTERS`, run
with `first_rejection` and `checks_for`): a project counts as fitting a node here exactly when the scheduler would
accept that node for it, so the autoscaler never adds a node the scheduler then refuses. Projects are judged by
shape (`packing.shapes_of`: the same requests, selector, tolerations, host paths and ports), once per template.

* `absorb`: projects that fit on nodes already on their way (asked for, or registered moments ago and not yet
  used by the scheduler) are packed there first; they ask for nothing more.
* `options`: per group with room left (`max - desired`), the projects that pass the filters on an empty template
  node, packed first-fit-decreasing over every node opened for the group in this pass (`packing.pack`) onto as
  few new nodes as the room allows: 10 projects that fit 5 to a node ask for 2 nodes, not 10.
* `infeasible`: projects that no group's empty template node accepts, with each group's reason; they never
  trigger a scale-up.

Host ports and host paths go through the same filters as everything else: two projects publishing one host port
are never packed on one simulated node (`NodePorts`), and a young node's `--allowed-host-paths` count
(`HostPaths`; a template node, like a node without the flag, allows any path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from caravanserai.controllers.autoscaler.packing import (
    Bin,
    Shape,
    clone,
    constrained_first,
    fits,
    pack,
    place,
    shapes_of,
    size,
)
from caravanserai.controllers.autoscaler.settings import GroupSettings, template_node
from caravanserai.controllers.scheduler.filters import FilterContext, first_rejection
from caravanserai.controllers.scheduler.resources import CPU, MEMORY
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo


@dataclass(frozen=True, slots=True)
class GroupOption:
    """Adding `nodes` nodes to `group` would let the scheduler place `projects`; `waste` is the share of the new
    nodes' cpu and memory (or, when the template declares neither, of all its resources) left unused."""

    group: str
    nodes: int
    projects: tuple[str, ...]
    waste: float
    priority: int = 0


def absorb(projects: Sequence[ProjectInfo], upcoming: Sequence[NodeInfo], ctx: FilterContext) -> set[str]:
    """The projects that fit on the `upcoming` nodes (filled in place: constrained projects first, then by size, so
    that a node asked for pinned projects is not taken by projects that fit anywhere)."""
    if not upcoming or not projects:
        return set()
    shapes = sorted(shapes_of(projects), key=constrained_first)
    return set(pack(shapes, upcoming, ctx).placed)


def waste(bins: Iterable[Bin]) -> float:
    """The unused share of the nodes' cpu and memory (all their resources when they declare neither)."""
    bins = [b for b in bins if b.count]
    if not bins:
        return 1.0
    names = {CPU, MEMORY} & set(bins[0].node.allocatable) or set(bins[0].node.allocatable)
    shares = []
    for name in sorted(names):
        capacity = sum(b.node.allocatable.get(name, 0) * b.count for b in bins)
        if capacity > 0:
            shares.append(sum(b.node.free(name) * b.count for b in bins) / capacity)
    return sum(shares) / len(shares) if shares else 1.0


def template_rejections(
    projects: Sequence[ProjectInfo], groups: Sequence[GroupSettings], ctx: FilterContext
) -> dict[str, dict[str, str]]:
    """Per project, per group, why an empty node of the group is refused ({} for a group that takes it); judged
    once per shape."""
    empty = {g.name: template_node(g, f"{g.name}-template", now=ctx.now) for g in groups}
    found: dict[str, dict[str, str]] = {}
    for shape in shapes_of(projects):
        reasons: dict[str, str] = {}
        for group in groups:
            rejection = first_rejection(shape.example, empty[group.name], ctx)
            if rejection is not None:
                reasons[group.name] = rejection.reason
        for member in shape.members:
            found[member.name] = reasons
    return found


def options(
    projects: Sequence[ProjectInfo],
    groups: Sequence[GroupSettings],
    room: Mapping[str, int],
    rejections: Mapping[str, Mapping[str, str]],
    ctx: FilterContext,
) -> list[GroupOption]:
    """One option per group with room that would place at least one of `projects` (see the module docstring)."""
    shapes = sorted(shapes_of(projects), key=size)
    found = []
    for group in groups:
        if room.get(group.name, 0) <= 0:
            continue
        candidates = [s for s in shapes if group.name not in rejections.get(s.example.name, {})]
        if not candidates:
            continue
        packing = pack(candidates, [], ctx, _Opener(group, room[group.name], ctx.now))
        if packing.placed:
            found.append(
                GroupOption(
                    group.name,
                    packing.nodes_opened,
                    tuple(sorted(packing.placed)),
                    waste(packing.opened),
                    priority=group.priority,
                )
            )
    return found


class _Opener:
    """Fresh empty template nodes of `group`; `room`: how many more the group may add (`packing.Opener`)."""

    def __init__(self, group: GroupSettings, room: int, now: float) -> None:
        self._group, self.room, self._now, self._count = group, room, now, 0

    def make(self) -> NodeInfo:
        self._count += 1
        return template_node(self._group, f"{self._group.name}-sim-{self._count}", now=self._now)


def infeasible(rejections: Mapping[str, Mapping[str, str]], groups: Sequence[GroupSettings]) -> dict[str, str]:
    """Projects that no group's template accepts, each with the reasons by group (`gpu: insufficient gpu; …`)."""
    names = [g.name for g in groups]
    out = {}
    for project, reasons in rejections.items():
        if all(name in reasons for name in names):
            out[project] = "; ".join(f"{name}: {reasons[name]}" for name in names) if names else "no node group"
    return out


__all__ = [
    "GroupOption",
    "Shape",
    "absorb",
    "clone",
    "fits",
    "infeasible",
    "options",
    "place",
    "template_rejections",
    "waste",
]
