"""Voluntary disruptions within ProjectSet disruption budgets, for clients (`caractrl drain`, the dashboard, a
node's scale-down): the live reading behind `caravanserai.project.disruption.may_disrupt`.

* `verdict` reads the project's set and the projects, then asks `may_disrupt` (no set or no budget: allowed).
* `move_within_budgets` moves projects off a node as a drain does (`nodeops.move_project`): projects of no set
  with a budget at once; replicas one budget at a time — a replica whose move would leave its set below its
  budget waits until the replicas moved before it are available again on other nodes (polling every `poll`
  seconds on the caller's clock), at most `timeout` seconds; those still refused then are returned with the
  budget's reason and are not moved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.client.client import Client
from caravanserai.client.nodeops import move_project
from caravanserai.clock import Clock
from caravanserai.errors import NotFound
from caravanserai.project.disruption import ALLOWED, Verdict, may_disrupt
from caravanserai.project.replicas import owning_set

DEFAULT_POLL = 1.0


async def verdict(client: Client, project: v1.Project, *, now: float) -> Verdict:
    """Whether `project` may be disrupted now, read live (module docstring)."""
    name = owning_set(project)
    if name is None:
        return ALLOWED
    namespace = project.metadata.namespace
    try:
        projectset = await client.projectsets.get(meta.join_key(namespace, name))  # a set owns in its namespace
    except NotFound:
        return ALLOWED
    if not projectset.spec.HasField("disruption_budget"):
        return ALLOWED
    projects = list(await client.projects.list(namespace=namespace))
    return may_disrupt(project, sets={name: projectset}, projects=projects, now=now)


@dataclass(slots=True)
class BudgetedMoves:
    """What `move_within_budgets` did: the projects moved, and those refused with their budget's reason (by key,
    `meta.key_of`)."""

    moved: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


async def held(client: Client, key: str, *, now: float) -> str:
    """Why disrupting the project `key` ("namespace/name") now would break its set's budget, read live ("" when it
    may be disrupted, or when it is gone)."""
    try:
        current = await client.projects.get(key)
    except NotFound:
        return ""
    answer = await verdict(client, current, now=now)
    return "" if answer.allowed else answer.reason


async def move_within_budgets(
    client: Client,
    node: str,
    projects: Sequence[v1.Project],
    *,
    clock: Clock,
    handoff: float,
    timeout: float,
    moved: Callable[[v1.Project], None] = lambda project: None,
    waiting: Callable[[str], None] = lambda reason: None,
    poll: float = DEFAULT_POLL,
) -> BudgetedMoves:
    """Move `projects` off `node` within their sets' budgets (module docstring). `moved` is told of each move,
    `waiting` of each new reason to wait."""
    outcome = BudgetedMoves()
    left = list(projects)
    deadline = clock.monotonic() + timeout
    last_reason = ""
    while left:
        for project in list(left):
            now, key = clock.now(), meta.key_of(project)
            reason = await held(client, key, now=now)
            if reason:
                outcome.refused[key] = reason
                continue
            left.remove(project)
            outcome.refused.pop(key, None)
            if await move_project(client, key, node, now=now, handoff_until=now + handoff):
                outcome.moved.append(key)
                moved(project)
        if not left or clock.monotonic() >= deadline:
            break
        reason = next(iter(outcome.refused.values()), "")
        if reason and reason != last_reason:
            waiting(reason)
            last_reason = reason
        await clock.sleep(poll)
    return outcome


__all__ = ["DEFAULT_POLL", "BudgetedMoves", "held", "move_within_budgets", "verdict"]
