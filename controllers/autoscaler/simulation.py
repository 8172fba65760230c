"""The scale-up simulation: which Pending projects would fit on new nodes of which group, and how many nodes.

Pure functions over the scheduler's own records (`ProjectInfo`, `NodeInfo`) and filters (`filters.FILTERS`, run
with `first_rejection`): a project counts as fitting a node here exactly when the scheduler would accept that node
for it, so the autoscaler never adds a node the scheduler then refuses.

* `absorb`: projects that fit on nodes already on their way (asked for, or registered moments ago and not yet
  used by the scheduler) are packed there first; they ask for nothing more.
* `options`: per group with room left (`max - desired`), the projects that pass the filters on an empty template
  node, packed first-fit-decreasing (each project tried on the last `OPEN_NODES` nodes opened, biggest first)
  onto as few new nodes as the room allows: 10 projects that fit 5 to a node ask for 2 nodes, not 10.
* `infeasible`: projects that no group's empty template node accepts, with each group's reason; they never
  trigger a scale-up.

Host ports count: projects packed on one simulated node never share a host port (`PortIndex`, as the scheduler).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from caravanserai.controllers.autoscaler.settings import GroupSettings, template_node
from caravanserai.controllers.scheduler.filters import FilterContext, FilterFunc, checks_for, first_rejection
from caravanserai.controllers.scheduler.resources import CPU, MEMORY, add_into
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo

OPEN_NODES = 4
"""How many of the most recently opened simulated nodes a project is tried on before a new one is opened."""


@dataclass(frozen=True, slots=True)
class GroupOption:
    """Adding `nodes` nodes to `group` would let the scheduler place `projects`; `waste` is the share of the new
    nodes' cpu and memory (or, when the template declares neither, of all its resources) left unused."""

    group: str
    nodes: int
    projects: tuple[str, ...]
    waste: float
    priority: int = 0


@dataclass(slots=True)
class _Packing:
    nodes: list[NodeInfo] = field(default_factory=list)
    placed: list[str] = field(default_factory=list)


def fits(
    project: ProjectInfo, node: NodeInfo, ctx: FilterContext, checks: tuple[FilterFunc, ...] | None = None
) -> bool:
    """Whether the scheduler's filters accept `node` for `project`. `checks`: the filters that can refuse some
    node for it (`filters.checks_for`, the scheduler's own shortcut), when the caller has them already."""
    return all(check(project, node, ctx) is None for check in (checks or checks_for(project)))


def clone(node: NodeInfo) -> NodeInfo:
    """A copy of `node` whose requests and host ports can be added to without touching the original."""
    return dataclasses.replace(node, requested=dict(node.requested), ports=copy.deepcopy(node.ports))


def place(project: ProjectInfo, node: NodeInfo) -> None:
    """Count `project` as bound to `node` (its requests and host ports)."""
    add_into(node.requested, project.requests)
    if project.host_ports:
        node.ports.add(project.name, project.host_ports)


def _size(project: ProjectInfo) -> tuple[int, int, str]:
    return (-project.requests.get(CPU, 0), -project.requests.get(MEMORY, 0), project.name)


def _constrained_first(project: ProjectInfo) -> tuple[bool, tuple[int, int, str]]:
    """Projects that only some nodes take (a node selector, tolerations) claim upcoming room before the others."""
    return (not (project.node_selector or project.tolerations), _size(project))


def absorb(projects: Sequence[ProjectInfo], upcoming: Sequence[NodeInfo], ctx: FilterContext) -> set[str]:
    """The projects that fit on the `upcoming` nodes (filled in place: constrained projects first, then by size, so
    that a node asked for pinned projects is not taken by projects that fit anywhere)."""
    absorbed: set[str] = set()
    if not upcoming:
        return absorbed
    smallest = {name: min(p.requests.get(name, 0) for p in projects) for name in (CPU, MEMORY)}
    room = list(upcoming)  # nodes that may still take a project (a full one is dropped: fewer checks)
    for project in sorted(projects, key=_constrained_first):
        checks = checks_for(project)
        node = next((n for n in room if fits(project, n, ctx, checks)), None)
        if node is not None:
            place(project, node)
            absorbed.add(project.name)
            if any(name in node.allocatable and node.free(name) < least for name, least in smallest.items()):
                room.remove(node)
    return absorbed


def _pack(projects: Sequence[ProjectInfo], group: GroupSettings, room: int, ctx: FilterContext) -> _Packing:
    packing = _Packing()
    for project in projects:
        checks = checks_for(project)
        node = next((n for n in packing.nodes[-OPEN_NODES:] if fits(project, n, ctx, checks)), None)
        if node is None:
            if len(packing.nodes) >= room:
                continue
            node = template_node(group, f"{group.name}-sim-{len(packing.nodes)}", now=ctx.now)
            packing.nodes.append(node)
        place(project, node)
        packing.placed.append(project.name)
    return packing


def waste(nodes: Iterable[NodeInfo]) -> float:
    """The unused share of the nodes' cpu and memory (all their resources when they declare neither)."""
    nodes = list(nodes)
    if not nodes:
        return 1.0
    names = {CPU, MEMORY} & set(nodes[0].allocatable) or set(nodes[0].allocatable)
    shares = []
    for name in sorted(names):
        capacity = sum(n.allocatable.get(name, 0) for n in nodes)
        if capacity > 0:
            shares.append(sum(n.free(name) for n in nodes) / capacity)
    return sum(shares) / len(shares) if shares else 1.0


def template_rejections(
    projects: Sequence[ProjectInfo], groups: Sequence[GroupSettings], ctx: FilterContext
) -> dict[str, dict[str, str]]:
    """Per project, per group, why an empty node of the group is refused ({} for a group that takes it)."""
    empty = {g.name: template_node(g, f"{g.name}-template", now=ctx.now) for g in groups}
    found: dict[str, dict[str, str]] = {}
    for project in projects:
        reasons: dict[str, str] = {}
        for group in groups:
            rejection = first_rejection(project, empty[group.name], ctx)
            if rejection is not None:
                reasons[group.name] = rejection.reason
        found[project.name] = reasons
    return found


def options(
    projects: Sequence[ProjectInfo],
    groups: Sequence[GroupSettings],
    room: Mapping[str, int],
    rejections: Mapping[str, Mapping[str, str]],
    ctx: FilterContext,
) -> list[GroupOption]:
    """One option per group with room that would place at least one of `projects` (see the module docstring)."""
    ordered = sorted(projects, key=_size)
    found = []
    for group in groups:
        if room.get(group.name, 0) <= 0:
            continue
        candidates = [p for p in ordered if group.name not in rejections.get(p.name, {})]
        if not candidates:
            continue
        packing = _pack(candidates, group, room[group.name], ctx)
        if packing.placed:
            found.append(
                GroupOption(
                    group.name,
                    len(packing.nodes),
                    tuple(sorted(packing.placed)),
                    waste(packing.nodes),
                    priority=group.priority,
                )
            )
    return found


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
    "OPEN_NODES",
    "absorb",
    "clone",
    "fits",
    "infeasible",
    "options",
    "place",
    "template_rejections",
    "waste",
]
