"""What a search remembers of a node between decisions, so that a node unchanged since is judged in one lookup.

A decision judges hundreds of nodes, and consecutive decisions judge mostly the same unchanged nodes again (each
binding changes one node). Of that work, the verdicts of TaintToleration, NodeResourcesFit and NodeUnschedulable
and the node's base score (`scores.scorer_parts`: resources, taints, start delay, RPO) depend only on the node's
record and on the project's *kind* (`kind_of`: its requests, tolerations and move needs, with the policy's
strategy and weights), never on the time or on other projects. `memo_evaluate` keeps them per node and kind in
`NodeInfo.memo`, stamped with the node's `version`, and works out the rest of a decision live.

Guarantees:

* **The same decision.** For every node, `memo_evaluate(...)(node)` is what the search's checks and score give:
  the first rejection of the checks in search order (the `before` checks, then the fused `BASICS` run), else the
  score (`scores.scorer`, the same float operations in the same order). Checked against a plain search of the
  unprepared filters on a `ClusterState` changed at random between decisions, in the unit tests.
* **Never stale.** An entry is read only at the `NodeInfo.version` it was made at; `ClusterState` changes the
  version on every change of the record (an upsert, what is counted on the node). A record it does not keep
  (version -1: what-if views, tests' records) is judged live and nothing is kept.
* **Live where it must be.** Readiness (the time), the room kept for nominated projects (a node with nominees is
  judged live), host ports (a project publishing some never uses the memo), the preference plugins (other
  projects) and the `before` checks (domain rules, selectors) are worked out in every decision.
* **Judged once per domain where only the domain counts.** When the `before` checks and the preference plugins
  read nothing of a node but its value of one topology key (`placementfilters.domain_key`: zone rules, the usual
  case), their verdict is worked out on the first node of each domain in the decision and looked up for the rest
  (`_by_domain`); the score adds the same parts in the same order.
* **Bounded.** At most `MEMO_KINDS` kinds are kept per node (past that, the node's memo starts again); kinds are
  numbered once and never reused, so a forgotten number can never be read as another kind.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable

from caravanserai.controllers.scheduler.filters import (
    NOT_READY_REJECTION,
    FilterContext,
    FilterFunc,
    Rejection,
    node_schedulable,
    resources_fit,
    taints_tolerated,
)
from caravanserai.controllers.scheduler.nodegate import BASICS, fused_basics
from caravanserai.controllers.scheduler.placementfilters import domain_key
from caravanserai.controllers.scheduler.scores import NodeScore, Weights
from caravanserai.controllers.scheduler.snapshot import Memo, NodeInfo, ProjectInfo

MEMO_KINDS = 8
"""Kinds of project remembered per node."""
MAX_KINDS = 4096
"""Kinds numbered before the numbering starts afresh (with new numbers)."""

Evaluate = Callable[[NodeInfo], Rejection | float]
"""A node's first rejection in a decision, or its score."""

_kinds: dict[Hashable, int] = {}
_numbers = itertools.count()


def kind_of(project: ProjectInfo, strategy: str, weights: Weights) -> int:
    """The number of `project`'s kind: the same for projects the memo judges alike (see the module docstring)."""
    key = (project.ordered_requests, project.tolerations, project.needs, strategy, weights)
    kind = _kinds.get(key)
    if kind is None:
        if len(_kinds) >= MAX_KINDS:
            _kinds.clear()  # new numbers from here on: entries under the old ones are never read again
        kind = _kinds[key] = next(_numbers)
    return kind


def split_basics(checks: tuple[FilterFunc, ...]) -> tuple[FilterFunc, ...] | None:
    """The checks before the `BASICS` run when `checks` end with it (the memo's case), else None."""
    size = len(BASICS)
    if checks[len(checks) - size :] == BASICS:
        return checks[: len(checks) - size]
    return None


def memo_evaluate(
    project: ProjectInfo,
    ctx: FilterContext,
    before: FilterFunc | None,
    base: NodeScore,
    preferences: list[tuple[float, NodeScore]],
    kind: int,
) -> Evaluate:
    """The evaluation of one decision of `project` (without host ports): `before` (the checks in front of the
    `BASICS` run, None for none), then the run and the score, remembered per node as the module docstring says.
    `base` and `preferences` are `scores.scorer_parts` of the decision."""
    now, timeout = ctx.now, ctx.heartbeat_timeout
    live = fused_basics(project, ctx)

    def static(node: NodeInfo) -> Memo:
        # TaintToleration and NodeResourcesFit (a node without taints passes the first; this node has no nominees)
        rejection = taints_tolerated(project, node, ctx) if node.taints else None
        if rejection is None:
            rejection = resources_fit(project, node, ctx)
        if rejection is not None:
            return node.version, rejection, rejection
        unschedulable = node_schedulable(project, node, ctx)
        return node.version, None, unschedulable if unschedulable is not None else base(node)

    def judged(node: NodeInfo) -> Rejection | float:
        """The node's first rejection of the `BASICS` run and NodeReady, else its base score."""
        if node.nominated or node.version < 0:  # judged live
            rejection = live(project, node, ctx)
            return rejection if rejection is not None else base(node)
        memo = node.memo
        entry = memo.get(kind)
        if entry is None or entry[0] != node.version:
            if len(memo) >= MEMO_KINDS:
                memo.clear()
            entry = memo[kind] = static(node)
        if entry[1] is not None:
            return entry[1]
        renew = node.renew_time  # NodeReady, live: it comes between NodeResourcesFit and NodeUnschedulable
        if renew is None or not now < renew + timeout:
            return NOT_READY_REJECTION
        return entry[2]

    key = domain_key(project, before)
    if key is not None:
        return _by_domain(project, ctx, key, before, preferences, judged)

    def evaluate(node: NodeInfo) -> Rejection | float:
        if before is not None:
            rejection = before(project, node, ctx)
            if rejection is not None:
                return rejection
        total = judged(node)
        if total.__class__ is Rejection:  # (not `isinstance`: a call per node)
            return total
        for weight, function in preferences:
            total += weight * function(node)  # type: ignore[operator]  # not a Rejection: a score
        return total

    return evaluate


def _by_domain(
    project: ProjectInfo,
    ctx: FilterContext,
    key: str,
    before: FilterFunc | None,
    preferences: list[tuple[float, NodeScore]],
    judged: Evaluate,
) -> Evaluate:
    """The evaluation when `before` and the preferences read only the node's value of `key` (`domain_key`): their
    verdict (the first rejection, or each weighted preference) is worked out on the first node of each domain and
    looked up for the others; the score adds the same parts in the same order as the general evaluation."""
    verdicts: dict[str | None, Rejection | tuple[float, ...]] = {}

    def verdict(node: NodeInfo) -> Rejection | tuple[float, ...]:
        if before is not None:
            rejection = before(project, node, ctx)
            if rejection is not None:
                return rejection
        return tuple(weight * function(node) for weight, function in preferences)

    def evaluate(node: NodeInfo) -> Rejection | float:
        domain = node.labels.get(key)
        found = verdicts.get(domain)
        if found is None:
            found = verdicts[domain] = verdict(node)
        if found.__class__ is Rejection:  # (not `isinstance`: a call per node)
            return found  # a Rejection
        total = judged(node)
        if total.__class__ is Rejection:
            return total
        for part in found:  # type: ignore[union-attr]  # not a Rejection: the weighted preferences
            total += part  # type: ignore[operator]  # not a Rejection: a score
        return total

    return evaluate


def check_then_score(project: ProjectInfo, ctx: FilterContext, check: FilterFunc, score: NodeScore) -> Evaluate:
    """The evaluation of a decision the memo does not serve: `check`, then `score` (nothing remembered)."""

    def evaluate(node: NodeInfo) -> Rejection | float:
        rejection = check(project, node, ctx)
        return rejection if rejection is not None else score(node)

    return evaluate


__all__ = ["Evaluate", "MAX_KINDS", "MEMO_KINDS", "check_then_score", "kind_of", "memo_evaluate", "split_basics"]
