"""May this project be disrupted now? The one rule behind every voluntary disruption: `caractrl drain`, the
scheduler's preemption, a node's scale-down. Pure functions over what the caller has read (its informers, or a
list), as Kubernetes' PodDisruptionBudget check.

* A project that belongs to no ProjectSet (`replicas.owning_set`), or to a set without `spec.disruptionBudget`,
  may always be disrupted (no budget: no bound, as in Kubernetes).
* A set's budget is a minimum of available replicas: `minAvailable` (a count, or a percentage of spec.replicas
  rounded up), or spec.replicas − `maxUnavailable` (a percentage rounded up too).
* A replica that is not available (`replicas.availability`, with the set's minReadySeconds) may be disrupted: it
  serves nothing, so removing it costs no availability.
* An available replica may be disrupted when, without it and without the replicas already being disrupted
  (`disrupting`: names the caller is about to move, or moved and whose replacements are not available yet), at
  least the minimum stays available.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.project.replicas import availability, owning_set, replicas_of, scaled


def minimum_available(spec: v1.ProjectSetSpec) -> int | None:
    """How many replicas the set's budget keeps available; None without a budget."""
    desired = replicas_of(spec)
    budget = spec.disruption_budget
    if budget.min_available:
        return scaled(budget.min_available, desired, round_up=True)
    if budget.max_unavailable:
        return max(0, desired - scaled(budget.max_unavailable, desired, round_up=True))
    return None


def available_replicas(projectset: v1.ProjectSet, projects: Iterable[v1.Project], *, now: float) -> list[str]:
    """Keys (`meta.key_of`) of the set's available replicas among `projects` (of any namespace: a set's replicas are
    those of its own namespace)."""
    name, namespace, min_ready = (
        projectset.metadata.name,
        projectset.metadata.namespace,
        projectset.spec.min_ready_seconds,
    )
    return [
        meta.key_of(p)
        for p in projects
        if owning_set(p) == name
        and p.metadata.namespace == namespace
        and availability(p, min_ready_seconds=min_ready, now=now).available
    ]


def disruptions_allowed(projectset: v1.ProjectSet, projects: Iterable[v1.Project], *, now: float) -> int | None:
    """How many available replicas of the set may be disrupted now; None without a budget."""
    minimum = minimum_available(projectset.spec)
    if minimum is None:
        return None
    return max(0, len(available_replicas(projectset, projects, now=now)) - minimum)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a disruption is allowed; `reason` says why not (empty when allowed)."""

    allowed: bool
    reason: str = ""


ALLOWED = Verdict(True)


def may_disrupt(
    project: v1.Project,
    *,
    sets: Mapping[str, v1.ProjectSet],
    projects: Iterable[v1.Project],
    now: float,
    disrupting: Collection[str] = (),
) -> Verdict:
    """Whether `project` may be disrupted now (module docstring). `sets`: the ProjectSets by name (a set of another
    namespace than the project's is not its set); `projects`: every project the caller knows (the set's replicas
    among them); `disrupting`: keys (`meta.key_of`) of replicas being disrupted already."""
    name = owning_set(project)
    projectset = sets.get(name) if name is not None else None
    if projectset is None or projectset.metadata.namespace != project.metadata.namespace:
        return ALLOWED
    minimum = minimum_available(projectset.spec)
    if minimum is None:
        return ALLOWED
    available = set(available_replicas(projectset, projects, now=now))
    if meta.key_of(project) not in available:
        return ALLOWED
    left = len(available - {meta.key_of(project)} - set(disrupting))
    if left >= minimum:
        return ALLOWED
    return Verdict(
        False,
        f"projectset {name}: disrupting {project.metadata.name} would leave {left} of its replicas available, "
        f"its disruption budget keeps {minimum}",
    )


__all__ = ["ALLOWED", "Verdict", "available_replicas", "disruptions_allowed", "may_disrupt", "minimum_available"]
