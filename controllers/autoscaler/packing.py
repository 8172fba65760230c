"""First-fit-decreasing packing of Pending projects onto nodes, judged by the scheduler's own filters.

Pending projects are grouped into **shapes** (`shapes_of`): projects the filters cannot tell apart (the same
requests, node selector, tolerations, host paths, host ports and priority, and no project placement rules), so
that a template is judged once per shape rather than once per project.

`pack` places shapes, largest first (projects only some nodes take first, when asked), each project on the
first node that the filters (`filters.checks_for`) accept, trying every node open in this packing, and opens a
new node (when `open_node` gives one) only when none accepts it. Nodes only fill up while a shape is placed, so a
node that refuses one project of a shape refuses the rest: each shape scans the nodes once. A shape without host
ports or placement rules is placed in runs: as many projects as the node's free room holds, the last of the run
judged by the filters on the node holding the others (the resource filter is monotonic, so the earlier ones would
have passed). Projects with host ports are placed one at a time, each judged under its own name, so that two
projects publishing one host port never share a node, as the scheduler's `NodePorts` filter rules.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from caravanserai.controllers.scheduler.filters import FilterContext, FilterFunc, Rejection, checks_for
from caravanserai.controllers.scheduler.resources import CPU, MEMORY, add_into
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.project.affinity import NO_PLACEMENT


@dataclass(frozen=True, slots=True)
class Shape:
    """Projects the scheduler's filters judge alike; `members` in name order, `example` the first."""

    members: tuple[ProjectInfo, ...]

    @property
    def example(self) -> ProjectInfo:
        return self.members[0]

    @property
    def in_runs(self) -> bool:
        """Whether copies may be placed in runs (no host ports, no project placement rules)."""
        return not self.example.host_ports and self.example.placement == NO_PLACEMENT


def signature(project: ProjectInfo) -> Hashable:
    """What the filters read of a project, besides its name (a project with placement rules is its own shape)."""
    if project.placement != NO_PLACEMENT:
        return ("own", project.name)
    return (
        tuple(project.ordered_requests),
        tuple(sorted(project.node_selector.items())),
        project.tolerations,
        project.host_paths,
        tuple(sorted(project.host_ports)),
        project.priority,
    )


def shapes_of(projects: Iterable[ProjectInfo]) -> list[Shape]:
    """`projects` grouped by `signature`, in the order of their first member's name."""
    found: dict[Hashable, list[ProjectInfo]] = {}
    for project in sorted(projects, key=lambda p: p.name):
        found.setdefault(signature(project), []).append(project)
    return [Shape(tuple(members)) for members in found.values()]


def size(shape: Shape) -> tuple[int, int, str]:
    """Largest first: cpu, then memory, then name (a stable order)."""
    example = shape.example
    return (-example.requests.get(CPU, 0), -example.requests.get(MEMORY, 0), example.name)


def constrained_first(shape: Shape) -> tuple[bool, tuple[int, int, str]]:
    """Projects only some nodes take (a node selector, tolerations) claim room before the others."""
    example = shape.example
    return (not (example.node_selector or example.tolerations), size(shape))


def clone(node: NodeInfo) -> NodeInfo:
    """A copy of `node` whose requests and host ports can be added to without touching the original."""
    return dataclasses.replace(node, requested=dict(node.requested), ports=copy.deepcopy(node.ports))


def place(project: ProjectInfo, node: NodeInfo, count: int = 1) -> None:
    """Count `count` copies of `project` as bound to `node` (requests; host ports under the project's name)."""
    if count == 1:
        add_into(node.requested, project.requests)
    else:
        add_into(node.requested, {name: want * count for name, want in project.requests.items()})
    if project.host_ports:
        node.ports.add(project.name, project.host_ports)


def fits(project: ProjectInfo, node: NodeInfo, ctx: FilterContext, checks: Sequence[FilterFunc]) -> bool:
    """Whether the scheduler's filters (`checks`: `checks_for(project)`) accept `node` for `project`."""
    return all(check(project, node, ctx) is None for check in checks)


def kind_of(node: NodeInfo) -> Hashable:
    """What the infeasible filters read of a node (labels, taints, allowed host paths, allocatable): two nodes of
    one kind are refused alike by them, whatever is bound there."""
    return (
        tuple(sorted(node.labels.items())),
        node.taints,
        node.allowed_host_paths,
        tuple(sorted(node.allocatable.items())),
    )


def _room_for(project: ProjectInfo, node: NodeInfo) -> int:
    """How many copies of `project` the node's free resources hold (a large number when it requests none)."""
    counts = [node.free(name) // want for name, want in project.requests.items() if want > 0]
    return max(0, min(counts)) if counts else 1 << 30


@dataclass(slots=True, eq=False)
class Bin:
    """`count` nodes, each in the state `node` (the same projects' worth of requests; a node with host ports
    taken is always a bin of its own); `opened`: nodes an `Opener` gave."""

    node: NodeInfo
    count: int = 1
    opened: bool = False


class Opener(Protocol):
    """Gives fresh empty nodes of one template: at most `room` more."""

    room: int

    def make(self) -> NodeInfo: ...


@dataclass(slots=True)
class Packing:
    """The result: `opened` the bins of the nodes the opener gave, in their final states; `placed` the project
    names placed (on any node)."""

    opened: list[Bin] = field(default_factory=list)
    placed: list[str] = field(default_factory=list)

    @property
    def nodes_opened(self) -> int:
        return sum(b.count for b in self.opened)


def pack(
    shapes: Sequence[Shape], nodes: Sequence[NodeInfo], ctx: FilterContext, opener: Opener | None = None
) -> Packing:
    """Place `shapes` (in the order given) on `nodes` (filled in place, except runs of identical nodes, which are
    judged on copies) and on fresh nodes of `opener`, as the module docstring says.

    Identical nodes are packed as one `Bin`: a fresh node that a shape fills is repeated for as many of its
    projects as need the same (the filters judge identical nodes alike), and a bin of several nodes that a shape
    enters is split into the nodes it fills and the others. A node too full for the smallest cpu or memory
    request of any shape leaves the scan (the resource filter would refuse it anyway)."""
    result = Packing()
    least = {name: min(s.example.requests.get(name, 0) for s in shapes) for name in (CPU, MEMORY)} if shapes else {}
    live = _bins([n for n in nodes if not _full(n, least)])
    kinds: dict[str, Hashable] = {}  # node name → kind_of(node)
    for shape in shapes:
        checks = checks_for(shape.example, ctx=ctx)
        refused: set[Hashable] = set()  # kinds of node an infeasible rejection ruled out for this shape
        waiting = list(shape.members)
        index = 0
        while waiting:
            while index < len(live) and not _accepts(waiting[0], live[index].node, ctx, checks, kinds, refused):
                index += 1
            fresh = index == len(live)
            if fresh:
                if opener is None or opener.room <= 0:
                    break
                node = opener.make()
                if _rejection(waiting[0], node, ctx, checks) is not None:
                    break
                opener.room -= 1
                live.append(Bin(node, opened=True))
                result.opened.append(live[-1])
            target = live[index]
            parts = _enter(shape, waiting, target, ctx, checks, opener if fresh else None)
            placed = sum(len(members) * part.count for part, members in parts if members)
            result.placed.extend(p.name for p in waiting[:placed])
            del waiting[:placed]
            bins = [part for part, _ in parts]
            if target.opened:
                result.opened = [b for b in result.opened if b is not target] + bins
            filled = sum(1 for _, members in parts if members)
            live[index : index + 1] = bins
            kept = [b for b in live[index : index + filled] if not _full(b.node, least)]
            live[index : index + filled] = kept
            index += len(kept)
    return result


def _enter(
    shape: Shape,
    waiting: list[ProjectInfo],
    target: Bin,
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
    opener: Opener | None,
) -> list[tuple[Bin, list[ProjectInfo]]]:
    """Fill the nodes of `target` with `waiting` (its first accepted already): the bins it becomes, in order, each
    with the projects each of its nodes took ([] for nodes left as they were). `opener`: `target` is a fresh node
    of it, which may be repeated while projects wait."""
    single, opened = target.count == 1, target.opened
    probe = target.node if single else clone(target.node)
    taken = _fill(shape, waiting, probe, ctx, checks)
    first = waiting[:taken]
    if not shape.in_runs or taken == 0:
        rest: list[tuple[Bin, list[ProjectInfo]]] = [] if single else [(Bin(target.node, target.count - 1, opened), [])]
        return [(Bin(probe, 1, opened), first), *rest]
    left = len(waiting) - taken
    more = left // taken
    if single:
        more = min(more, opener.room) if opener is not None else 0
        if opener is not None:
            opener.room -= more
        return [(Bin(probe, 1 + more, opened), first)]
    more = min(more, target.count - 1)
    parts: list[tuple[Bin, list[ProjectInfo]]] = [(Bin(probe, 1 + more, opened), first)]
    unused = target.count - 1 - more
    remainder = left - more * taken
    if unused and 0 < remainder < taken:
        partial = clone(target.node)
        members = waiting[taken * (1 + more) :]
        count = _fill(shape, members, partial, ctx, checks)
        parts.append((Bin(partial, 1, opened), members[:count]))
        unused -= 1
    if unused:
        parts.append((Bin(target.node, unused, opened), []))
    return parts


def _bins(nodes: Sequence[NodeInfo]) -> list[Bin]:
    """`nodes` in order, a run of identical ones (the same kind, requests, readiness and cordon, no host ports
    taken, no room kept for nominated projects) as one bin."""
    bins: list[Bin] = []
    last: Hashable = None
    for node in nodes:
        key = None
        if not node.ports and not node.nominated:
            key = (kind_of(node), tuple(sorted(node.requested.items())), node.renew_time, node.unschedulable)
        if key is not None and key == last:
            bins[-1].count += 1
        else:
            bins.append(Bin(node))
        last = key
    return bins


def _full(node: NodeInfo, least: dict[str, int]) -> bool:
    return any(name in node.allocatable and node.free(name) < want for name, want in least.items())


def _accepts(
    project: ProjectInfo,
    node: NodeInfo,
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
    kinds: dict[str, Hashable],
    refused: set[Hashable],
) -> bool:
    """The filters' verdict on `node`. Skipped without running them: a node whose free room the resource filter
    would refuse, and a node of a kind (`kind_of`) an infeasible rejection already ruled out for this shape."""
    kind = kinds.get(node.name)
    if kind is None:
        kind = kinds[node.name] = kind_of(node)
    if kind in refused or _room_for(project, node) == 0:
        return False
    rejection = _rejection(project, node, ctx, checks)
    if rejection is not None and rejection.infeasible:
        refused.add(kind)
    return rejection is None


def _rejection(
    project: ProjectInfo, node: NodeInfo, ctx: FilterContext, checks: Sequence[FilterFunc]
) -> Rejection | None:
    for check in checks:
        rejection = check(project, node, ctx)
        if rejection is not None:
            return rejection
    return None


def _fill(
    shape: Shape, waiting: list[ProjectInfo], node: NodeInfo, ctx: FilterContext, checks: Sequence[FilterFunc]
) -> int:
    """Place the first of `waiting` (accepted already) on `node`, then as many more as the filters accept there;
    how many were placed."""
    place(waiting[0], node)
    taken = 1
    run = min(_room_for(shape.example, node), len(waiting) - 1) if shape.in_runs else 0
    if run > 1:
        place(shape.example, node, run - 1)  # judged below, with the last copy of the run
        if fits(shape.example, node, ctx, checks):
            place(shape.example, node)
            return taken + run
        _unplace(shape.example, node, run - 1)  # another filter refused the run: one at a time
    while taken < len(waiting) and fits(waiting[taken], node, ctx, checks):
        place(waiting[taken], node)
        taken += 1
    return taken


def _unplace(project: ProjectInfo, node: NodeInfo, count: int) -> None:
    add_into(node.requested, {name: -want * count for name, want in project.requests.items()})


__all__ = [
    "Bin",
    "Opener",
    "Packing",
    "Shape",
    "clone",
    "constrained_first",
    "fits",
    "kind_of",
    "pack",
    "place",
    "shapes_of",
    "signature",
    "size",
]
