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
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

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


@dataclass(slots=True)
class _Node:
    node: NodeInfo
    candidates: Sequence[Candidate]  # sorted by priority
    lower: int  # no set smaller than this can free enough resources
    shortfall: Resources  # what must be freed, per resource
    least_top: int  # no set of `lower` victims has a highest priority below this
    hint: VictimKey | tuple[()] = ()  # with `lower` 1: the least key a single victim here could have


def choose(
    project: ProjectInfo,
    nodes: Iterable[NodeInfo],
    bound: BoundView,
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
) -> Choice | None:
    """The node and the smallest victim set for `project` (see the module docstring); None when no node has
    lower-priority projects whose eviction could free enough, a `Choice` without node when none lets it pass."""

    counted = resources_fit in checks
    options = sorted(
        (option for node in nodes if (option := _option(project, node, bound, counted)) is not None),
        key=lambda option: (option.lower, option.least_top, option.hint, option.node.name),
    )
    best: tuple[VictimKey, str, tuple[Candidate, ...]] | None = None
    exact = True
    for option in options:
        if best is not None and (option.lower, option.least_top) > best[0][:2]:
            break  # every later node needs more victims, or victims of a higher priority, than the best found
        if best is not None and option.hint and option.hint >= best[0]:
            break  # single victims only, sorted by the least key they could have: none of the rest does better
        if _unresolvable(project, option.node, ctx, checks):
            continue
        found, exhaustive = _smallest(project, option, ctx, checks, None if best is None else best[0])
        exact = exact and exhaustive
        if found is not None and (best is None or (victim_key(found), option.node.name) < best[:2]):
            best = (victim_key(found), option.node.name, found)
    if best is None:
        return Choice("", (), len(options), exact) if options else None
    return Choice(best[1], best[2], len(options), exact)


def _option(project: ProjectInfo, node: NodeInfo, bound: BoundView, counted: bool) -> _Node | None:
    """`node` as a place to preempt on, or None when evicting there cannot help. Runs for every node: a node
    with nothing below the preemptor's priority costs one comparison (`evictable_on` is sorted by priority)."""
    priority = project.priority
    evictable = bound.evictable_on(node.name)
    if not evictable or evictable[0].priority >= priority:
        return None
    candidates = (
        list(evictable) if evictable[-1].priority < priority else [c for c in evictable if c.priority < priority]
    )
    shortfall = _shortfall(project, node) if counted else {}
    lower = _lower_bound(shortfall, candidates)
    if lower is None:
        return None
    option = _Node(node, candidates, lower, shortfall, candidates[lower - 1].priority)  # sorted by priority
    if lower == 1:
        option.hint = _least_single(candidates, tuple(shortfall.items()))
    return option


def _least_single(candidates: Sequence[Candidate], shortfall: tuple[tuple[str, int], ...]) -> VictimKey | tuple[()]:
    """The least `victim_key` of one candidate (of `candidates`, sorted by priority) that covers `shortfall`."""
    best: VictimKey | tuple[()] = ()
    for victim in candidates:
        if best and victim.priority > best[1]:
            break  # sorted by priority: no later single can be less
        requests = victim.requests
        for name, missing in shortfall:
            if requests.get(name, 0) < missing:
                break
        else:
            key = victim_key((victim,))
            if not best or key < best:
                best = key
    return best


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
    reserved = node.nominated.reserved(project.name, project.priority) if node.nominated else {}
    short: Resources = {}
    for name, want in project.ordered_requests:
        missing = want - (node.allocatable.get(name, 0) - node.requested.get(name, 0) - reserved.get(name, 0))
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
