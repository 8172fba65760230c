"""Which node, and which projects to evict there, so that a Pending project fits. Pure: nothing here awaits.

The rule (issue "Scheduling by intent"): among the nodes where evicting projects of strictly lower priority lets
the preemptor pass every filter, the smallest victim set, compared by `victim_key`:

1. **fewest** victims;
2. **lowest priority**: the lowest highest-priority victim, then the lowest sum of priorities;
3. **newest first**: the set whose oldest victim is the newest;
4. then victim names, then the node name (deterministic).

Guarantees:

* **Only lower priority, only evictable.** Candidates on a node are its projects of strictly lower priority that
  are Scheduled or Running, not being deleted and not already moving (`index.py`); equal or higher priority is
  never a victim.
* **Nothing that cannot help.** A node that refuses the preemptor for a reason eviction cannot change (infeasible:
  selector, taints, too small; NotReady; cordoned) is skipped, and so is a node where even evicting every
  candidate does not make the preemptor pass: then nothing is chosen there, and when no node qualifies nothing
  is preempted at all.
* **The real filters decide.** Every set is checked with the scheduler's filter chain on the node with the set
  taken off (`whatif.passes`); the resource arithmetic below only skips sets that cannot pass `resources_fit`.
* **Minimal.** Sizes are tried from a lower bound up (per resource, how many of the largest candidates it takes
  to cover the shortfall), every set of a size is considered, and a node is left as soon as its lower bound
  exceeds the best size found, so the result is the minimum of `victim_key` over all nodes and all subsets
  (checked against a brute force in the unit tests) — as long as a node's sets of the sizes tried number at most
  `MAX_SETS_PER_NODE`. Past that budget (a node running very many small lower-priority projects) that node falls
  back to kube-scheduler's reprieve: evict every candidate, then keep back each one, most valuable first,
  whenever the preemptor still fits without evicting it (a set no member of which can be spared).
* **Single victims first, from an index.** Any one victim beats any two, and single victims compare by priority,
  then newest, then name: the order `BoundView.lowest` keeps over the whole cluster. So the cheapest single
  victims are tried first, each on its own node; the first that lets the preemptor pass is the answer. Only when
  none of the first `SINGLE_WALK` does are the nodes searched one by one as above. Either way every node is
  looked at once, for the count of nodes where eviction could make room (`Choice.nodes`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from caravanserai.controllers.scheduler.filters import (
    NOT_READY,
    UNSCHEDULABLE,
    FilterContext,
    FilterFunc,
    resources_fit,
)
from caravanserai.controllers.scheduler.preemption.index import Candidate
from caravanserai.controllers.scheduler.preemption.whatif import passes
from caravanserai.controllers.scheduler.resources import Resources
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo

MAX_SETS_PER_NODE = 4096
SINGLE_WALK = 256  # single victims tried cluster-wide, cheapest first, before the nodes are searched one by one
UNRESOLVABLE = frozenset({NOT_READY, UNSCHEDULABLE})  # unavailable reasons no eviction changes

VictimKey = tuple[int, int, int, float, tuple[str, ...]]


def victim_key(victims: Sequence[Candidate]) -> VictimKey:
    """The order of victim sets: fewest, lowest highest priority, lowest priority sum, newest oldest member,
    names."""
    if len(victims) == 1:  # the common case, without the generic walk
        (only,) = victims
        return (1, only.priority, only.priority, -only.created, (only.name,))
    priorities = [victim.priority for victim in victims]
    return (
        len(victims),
        max(priorities, default=0),
        sum(priorities),
        -min((victim.created for victim in victims), default=0.0),
        tuple(sorted(victim.name for victim in victims)),
    )


class BoundView(Protocol):
    """Who is bound where, as `choose` reads it (`index.BoundProjects`, or `budgets.GuardedBound`)."""

    def evictable_on(self, node: str) -> Sequence[Candidate]:
        """The evictable projects bound to `node`, lowest priority first."""
        ...

    def lowest(self, priority: int) -> Iterator[Candidate]:
        """The evictable projects of priority below `priority` on every node: lowest priority, newest, by name."""
        ...

    def node_of(self, name: str) -> str:
        """The node project `name` is bound to ("" when none)."""
        ...


@dataclass(frozen=True, slots=True)
class Choice:
    """The node to nominate and the victims to evict there; `nodes` is how many nodes had lower-priority projects
    whose eviction could free enough resources (the ones compared), `exact` False when a node's budget forced the
    reprieve. `node` is "" (and `victims` empty) when some node had such projects but no set lets the preemptor
    pass every filter there."""

    node: str
    victims: tuple[Candidate, ...]
    nodes: int
    exact: bool = True


class _Node(NamedTuple):
    """A node where evicting could make room, ordered (as a tuple) by how good its best set could be at most."""

    lower: int  # no set smaller than this can free enough resources
    least_top: int  # no set of `lower` victims has a highest priority below this
    hint: VictimKey | tuple[()]  # with `lower` 1: the least key a single victim here could have (() when none)
    name: str  # the node's name (unique: the order never looks further)
    node: NodeInfo
    candidates: Sequence[Candidate]  # sorted by priority
    shortfall: Resources  # what must be freed, per resource


def choose(
    project: ProjectInfo,
    nodes: Iterable[NodeInfo],
    bound: BoundView,
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
) -> Choice | None:
    """The node and the smallest victim set for `project` (see the module docstring); None when no node has
    lower-priority projects whose eviction could free enough, a `Choice` without node when none lets it pass."""
    counted, priority, evictable_on = resources_fit in checks, project.priority, bound.evictable_on
    if next(bound.lowest(priority), None) is None:
        return None  # nothing below its priority anywhere (the lowest priority's own projects: at once)
    room: dict[str, tuple[NodeInfo, Sequence[Candidate], Resources]] = {}
    for node in nodes:
        evictable = evictable_on(node.name)
        if evictable and evictable[0].priority < priority:  # else nothing here is below the preemptor's priority
            found = _room(project, node, evictable, counted)
            if found is not None:
                room[node.name] = (node, *found)
    if not room:
        return None
    single = _best_single(project, room, bound, ctx, checks)
    if single is not None:
        return Choice(single[0], (single[1],), len(room), True)
    return _search_nodes(project, room, ctx, checks)


def _room(
    project: ProjectInfo, node: NodeInfo, evictable: Sequence[Candidate], counted: bool
) -> tuple[Sequence[Candidate], Resources] | None:
    """(the candidates on `node`, what they must free there) when evicting all of them frees enough, else None.
    `evictable` starts below the preemptor's priority."""
    priority = project.priority
    candidates = evictable if evictable[-1].priority < priority else [c for c in evictable if c.priority < priority]
    shortfall = _shortfall(project, node) if counted else {}
    for name, missing in shortfall.items():
        freed = 0
        for victim in candidates:
            freed += victim.requests.get(name, 0)
            if freed >= missing:
                break
        else:
            return None
    return candidates, shortfall


def _best_single(
    project: ProjectInfo,
    room: dict[str, tuple[NodeInfo, Sequence[Candidate], Resources]],
    bound: BoundView,
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
) -> tuple[str, Candidate] | None:
    """(node, victim): the least single victim of the cluster that lets the preemptor pass (see the module
    docstring), or None when none of the first `SINGLE_WALK` does."""
    unresolvable: set[str] = set()
    for walked, victim in enumerate(bound.lowest(project.priority)):
        if walked >= SINGLE_WALK:
            return None
        entry = room.get(bound.node_of(victim.name))
        if entry is None or not _covers((victim,), entry[2]):
            continue
        node = entry[0]
        if node.name in unresolvable:
            continue
        if _unresolvable(project, node, ctx, checks):
            unresolvable.add(node.name)
        elif passes(project, node, (victim,), ctx, checks):
            return node.name, victim
    return None


def _search_nodes(
    project: ProjectInfo,
    room: dict[str, tuple[NodeInfo, Sequence[Candidate], Resources]],
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
) -> Choice:
    """The smallest set over the nodes of `room`, taken best-first from a heap that stops as soon as no remaining
    node can do better than the best set found."""
    options = [_option(node, candidates, shortfall) for node, candidates, shortfall in room.values()]
    heapq.heapify(options)
    best: tuple[VictimKey, str, tuple[Candidate, ...]] | None = None
    exact = True
    while options:
        option = heapq.heappop(options)
        if best is not None and (option.lower, option.least_top) > best[0][:2]:
            break  # every later node needs more victims, or victims of a higher priority, than the best found
        if best is not None and option.hint and option.hint >= best[0]:
            break  # single victims only, sorted by the least key they could have: none of the rest does better
        if _unresolvable(project, option.node, ctx, checks):
            continue
        found, exhaustive = _smallest(project, option, ctx, checks, None if best is None else best[0])
        exact = exact and exhaustive
        if found is not None and (best is None or (victim_key(found), option.name) < best[:2]):
            best = (victim_key(found), option.name, found)
    if best is None:
        return Choice("", (), len(room), exact)
    return Choice(best[1], best[2], len(room), exact)


def _option(node: NodeInfo, candidates: Sequence[Candidate], shortfall: Resources) -> _Node:
    """`node` as a place to preempt on (evicting all `candidates` frees `shortfall`)."""
    hint = _least_single(candidates, shortfall)
    lower = 1 if hint else _lower_bound(shortfall, candidates)  # a single covering victim: the bound is 1
    assert lower is not None  # every candidate together covers the shortfall (`_room`)
    return _Node(lower, candidates[lower - 1].priority, hint, node.name, node, candidates, shortfall)


def _least_single(candidates: Sequence[Candidate], shortfall: Resources) -> VictimKey | tuple[()]:
    """The least `victim_key` of one candidate (of `candidates`, sorted by priority) that covers `shortfall`
    (() when none does). Of single victims, the key orders by priority, then newest, then name."""
    best: Candidate | None = None
    missing_items = shortfall.items()
    for victim in candidates:
        if best is not None and victim.priority > best.priority:
            break  # sorted by priority: no later single can be less
        requests = victim.requests
        for name, missing in missing_items:
            if requests.get(name, 0) < missing:
                break
        else:
            if best is None or (-victim.created, victim.name) < (-best.created, best.name):
                best = victim
    return () if best is None else victim_key((best,))


def _unresolvable(project: ProjectInfo, node: NodeInfo, ctx: FilterContext, checks: Sequence[FilterFunc]) -> bool:
    """Whether the node refuses the project for a reason no eviction changes (looked at only for the nodes a
    choice gets to)."""
    for check in checks:
        rejection = check(project, node, ctx)
        if rejection is not None:
            return rejection.infeasible or rejection.reason in UNRESOLVABLE
    return False


def _shortfall(project: ProjectInfo, node: NodeInfo) -> Resources:
    """Per resource, how much more than is free now (room kept for others' nominations included) it needs."""
    allocatable, requested, short = node.allocatable, node.requested, {}
    if node.nominated:
        reserved = node.nominated.reserved(project.name, project.priority)
        for name, want in project.ordered_requests:
            missing = want - (allocatable.get(name, 0) - requested.get(name, 0) - reserved.get(name, 0))
            if missing > 0:
                short[name] = missing
        return short
    for name, want in project.ordered_requests:  # the same without nominations (nearly every node)
        missing = want - (allocatable.get(name, 0) - requested.get(name, 0))
        if missing > 0:
            short[name] = missing
    return short


def _lower_bound(shortfall: Resources, candidates: Sequence[Candidate]) -> int | None:
    """The fewest candidates whose requests can cover `shortfall` (each resource with its largest candidates);
    None when all of them together cannot. At least 1."""
    lower = 1
    for name, missing in shortfall.items():
        freed = count = 0
        for amount in sorted((c.requests.get(name, 0) for c in candidates), reverse=True):
            if freed >= missing:
                break
            freed += amount
            count += 1
        if freed < missing:
            return None
        lower = max(lower, count)
    return lower


def _covers(victims: Sequence[Candidate], shortfall: Resources) -> bool:
    return all(sum(v.requests.get(name, 0) for v in victims) >= missing for name, missing in shortfall.items())


def _smallest(
    project: ProjectInfo,
    option: _Node,
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
    better_than: VictimKey | None,
) -> tuple[tuple[Candidate, ...] | None, bool]:
    """The set of least `victim_key` on the node below `better_than` (None: none), and whether the search was
    exhaustive (False: the budget ran out and the reprieve answered)."""
    node, candidates, shortfall = option.node, option.candidates, option.shortfall
    budget = MAX_SETS_PER_NODE
    for size in range(option.lower, len(candidates) + 1):
        if better_than is not None and size > better_than[0]:
            return None, True
        found: tuple[Candidate, ...] | None = None
        found_key = better_than
        for victims in itertools.combinations(candidates, size):
            budget -= 1
            if budget < 0:
                return _reprieve(project, node, candidates, ctx, checks), False
            if not _covers(victims, shortfall):
                continue
            key = victim_key(victims)
            if found_key is not None and key >= found_key:
                continue
            if passes(project, node, victims, ctx, checks):
                found, found_key = victims, key
        if found is not None:
            return found, True
    return None, True


def _reprieve(
    project: ProjectInfo,
    node: NodeInfo,
    candidates: Sequence[Candidate],
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
) -> tuple[Candidate, ...] | None:
    """kube-scheduler's reprieve: every candidate evicted (None when even that does not let the preemptor pass),
    then each kept back (highest priority, oldest first) while the preemptor still passes without evicting it."""

    victims = list(candidates)
    if not passes(project, node, victims, ctx, checks):
        return None
    for spared in sorted(candidates, key=lambda c: (-c.priority, c.created, c.name)):
        trial = [victim for victim in victims if victim is not spared]
        if passes(project, node, trial, ctx, checks):
            victims = trial
    return tuple(victims)


__all__ = ["Choice", "MAX_SETS_PER_NODE", "UNRESOLVABLE", "VictimKey", "choose", "victim_key"]
