"""ProjectSets: spec.replicas projects made from a template, replaced by rolling updates (as a Deployment).

Defaults (on Create and Update, so `get -o yaml` shows what the controller reads): `spec.replicas` 1,
`spec.strategy.type` RollingUpdate with `maxSurge` and `maxUnavailable` 25%, `progressDeadlineSeconds` 600,
`revisionHistoryLimit` 10.

Rules:

* `metadata.name` is a DNS label of at most 46 characters (a replica's name adds 17).
* `spec.selector` is required and not empty; its `matchLabels` and `matchExpressions` are checked as every label
  selector is, and it must select `spec.template.labels` (else the set could never find its own replicas).
* `spec.template.labels` are labels; `spec.template.spec` is checked by the Project's rules, named
  `spec.template.spec.…`.
* `spec.replicas`, `spec.minReadySeconds` and `spec.revisionHistoryLimit` are not negative;
  `spec.progressDeadlineSeconds` is above `spec.minReadySeconds` (Kubernetes' rule: a replica could otherwise never
  make progress in time).
* `spec.strategy.type` is RollingUpdate or Recreate; `rollingUpdate` only with RollingUpdate; `maxSurge` and
  `maxUnavailable` are counts or percentages (at most 100%) and not both zero.
* `spec.disruptionBudget` sets at most one of `minAvailable` and `maxUnavailable`, each a count or a percentage.
* status: well-formed conditions, counts not negative.

Controllers (the ProjectSet controller) write the status; writing the spec stays with users (and `caractrl scale`,
`rollout undo|pause|resume`, which are spec writes).
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.apiserver.kinds.project.affinityrules import label_selector
from caravanserai.apiserver.kinds.project.rules import project_spec
from caravanserai.project import replicas
from caravanserai.project.affinity import selector_of
from caravanserai.text.selectors import validate_dns_label
from caravanserai.text.violations import Violations

KIND = meta.KINDS["projectsets"]
MAX_NAME = 63 - len("-0123456789-abcde")
"""A replica is named `<set>-<template hash>-<5 characters>` and must stay a DNS label."""


def set_name(name: str) -> str | None:
    """Why `name` cannot name a set: not a DNS label, or too long for its replicas' names."""
    problem = validate_dns_label(name)
    if problem is None and len(name) > MAX_NAME:
        return f"must be at most {MAX_NAME} characters (its replicas are named <set>-<hash>-<suffix>)"
    return problem


def default_spec(spec: v1.ProjectSetSpec) -> None:
    """Write the defaults (module docstring) into `spec`."""
    if not spec.HasField("replicas"):
        spec.replicas = replicas.DEFAULT_REPLICAS
    if not spec.strategy.type:
        spec.strategy.type = v1.ROLLING_UPDATE
    if spec.strategy.type == v1.ROLLING_UPDATE:
        rolling = spec.strategy.rolling_update
        rolling.max_surge = rolling.max_surge or replicas.DEFAULT_SURGE
        rolling.max_unavailable = rolling.max_unavailable or replicas.DEFAULT_UNAVAILABLE
    if not spec.HasField("progress_deadline_seconds"):
        spec.progress_deadline_seconds = replicas.DEFAULT_PROGRESS_DEADLINE
    if not spec.HasField("revision_history_limit"):
        spec.revision_history_limit = replicas.DEFAULT_HISTORY_LIMIT


def _count(errors: Violations, path: str, text: str) -> None:
    if text:
        errors.check(path, replicas.count_problem(text))


def _strategy(errors: Violations, strategy: v1.ProjectSetStrategy) -> None:
    errors.choice("spec.strategy.type", strategy.type, v1.SET_STRATEGIES, empty=f"for {v1.ROLLING_UPDATE}")
    if not strategy.HasField("rolling_update"):
        return
    if strategy.type == v1.RECREATE:
        errors.add("spec.strategy.rollingUpdate", "may only be given with type RollingUpdate")
        return
    rolling = strategy.rolling_update
    _count(errors, "spec.strategy.rollingUpdate.maxSurge", rolling.max_surge)
    _count(errors, "spec.strategy.rollingUpdate.maxUnavailable", rolling.max_unavailable)
    if rolling.max_surge in ("0", "0%") and rolling.max_unavailable in ("0", "0%"):
        errors.add("spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when maxSurge is 0")


def _budget(errors: Violations, budget: v1.DisruptionBudget) -> None:
    if budget.min_available and budget.max_unavailable:
        errors.add("spec.disruptionBudget", "set minAvailable or maxUnavailable, not both")
    _count(errors, "spec.disruptionBudget.minAvailable", budget.min_available)
    _count(errors, "spec.disruptionBudget.maxUnavailable", budget.max_unavailable)


def _selector(errors: Violations, spec: v1.ProjectSetSpec) -> None:
    selector = spec.selector
    if not selector.match_labels and not selector.match_expressions:
        errors.add("spec.selector", "is required: the labels that find the set's replicas (e.g. matchLabels)")
        return
    label_selector(errors, "spec.selector", selector)
    if not selector_of(selector).matches(spec.template.labels):
        errors.add("spec.template.labels", "must match spec.selector (the set finds its replicas by it)")


def _template(errors: Violations, template: v1.ProjectTemplate) -> None:
    validation.labels(errors, "spec.template.labels", template.labels)
    inner = Violations()
    project_spec(inner, template.spec)
    for violation in inner.violations:
        errors.add(f"spec.template.{violation.field}", violation.description)


def set_spec(errors: Violations, spec: v1.ProjectSetSpec) -> None:
    """The rules of `spec` (module docstring), every violation naming its field."""
    errors.non_negative("spec.replicas", spec.replicas)
    errors.non_negative("spec.minReadySeconds", spec.min_ready_seconds)
    errors.non_negative("spec.revisionHistoryLimit", spec.revision_history_limit)
    if spec.HasField("progress_deadline_seconds") and spec.progress_deadline_seconds <= spec.min_ready_seconds:
        errors.add(
            "spec.progressDeadlineSeconds",
            f"must be above spec.minReadySeconds ({spec.min_ready_seconds}), not {spec.progress_deadline_seconds}",
        )
    _selector(errors, spec)
    _template(errors, spec.template)
    _strategy(errors, spec.strategy)
    _budget(errors, spec.disruption_budget)


def set_status(errors: Violations, status: v1.ProjectSetStatus) -> None:
    validation.conditions(errors, "status.conditions", status.conditions)
    for field in ("replicas", "ready_replicas", "updated_replicas", "available_replicas", "unavailable_replicas"):
        errors.non_negative(f"status.{field}", getattr(status, field))


class ProjectSetStrategy(KindStrategy[v1.ProjectSet]):
    """Defaults and the rules above; controllers write the status."""

    status_on_create = False
    controller_writes = frozenset({"update_status"})

    def default_new(self, obj: v1.ProjectSet, *, now: float) -> None:
        default_spec(obj.spec)

    def prepare_update(self, old: v1.ProjectSet, new: v1.ProjectSet) -> v1.ProjectSet:
        defaulted = meta.copy(new)
        default_spec(defaulted.spec)
        return super().prepare_update(old, defaulted)

    def validate(self, obj: v1.ProjectSet) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=set_name, spec_rule=set_spec)

    def validate_status(self, obj: v1.ProjectSet) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=set_status)


STRATEGY = ProjectSetStrategy(KIND)

__all__ = ["KIND", "MAX_NAME", "STRATEGY", "ProjectSetStrategy", "default_spec", "set_name", "set_spec", "set_status"]
