"""The rules of a project's `spec.affinity` and `spec.topologySpreadConstraints`, each refusal at its field path.

* node requirements: a valid label key; an operator of `NODE_OPERATORS`; In/NotIn with at least one value,
  Exists/DoesNotExist with none, Gt/Lt with exactly one integer; values valid label values; a term with at least
  one requirement; preferred weights 1-100.
* project terms: a label selector (keys, values, operators In/NotIn/Exists/DoesNotExist with the same value rules);
  a non-empty, valid `topologyKey`; preferred weights 1-100.
* spread constraints: `maxSkew` at least 1, a valid `topologyKey`, `whenUnsatisfiable` DoNotSchedule (the default
  when empty) or ScheduleAnyway, a valid label selector.

What the fields mean is `caravanserai.project.affinity`'s; this module only says which values are well-formed.
"""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai import v1
from caravanserai.apiserver import validation
from caravanserai.project.affinity import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    LABEL_OPERATORS,
    LT,
    MAX_WEIGHT,
    MIN_WEIGHT,
    NODE_OPERATORS,
    WHEN_UNSATISFIABLE,
    as_integer,
)
from caravanserai.text.selectors import validate_label_key, validate_label_value
from caravanserai.text.violations import Violations, quote


def placement_rules(errors: Violations, spec: v1.ProjectSpec) -> None:
    """Check `spec.affinity` and `spec.topologySpreadConstraints`."""
    if spec.HasField("affinity"):
        affinity = spec.affinity
        _node_affinity(errors, "spec.affinity.nodeAffinity", affinity.node_affinity)
        _project_affinity(errors, "spec.affinity.projectAffinity", affinity.project_affinity)
        _project_affinity(errors, "spec.affinity.projectAntiAffinity", affinity.project_anti_affinity)
    for i, constraint in enumerate(spec.topology_spread_constraints):
        _spread(errors, f"spec.topologySpreadConstraints[{i}]", constraint)


def _node_affinity(errors: Violations, path: str, rules: v1.NodeAffinity) -> None:
    for i, term in enumerate(rules.required):
        _node_term(errors, f"{path}.required[{i}]", term)
    for i, preferred in enumerate(rules.preferred):
        errors.between(f"{path}.preferred[{i}].weight", preferred.weight, MIN_WEIGHT, MAX_WEIGHT)
        _node_term(errors, f"{path}.preferred[{i}].preference", preferred.preference)


def _node_term(errors: Violations, path: str, term: v1.NodeSelectorTerm) -> None:
    if not term.match_expressions:
        errors.add(f"{path}.matchExpressions", "at least one requirement is required (an empty term matches no node)")
    for i, requirement in enumerate(term.match_expressions):
        _requirement(errors, f"{path}.matchExpressions[{i}]", requirement, NODE_OPERATORS)


def _requirement(
    errors: Violations,
    path: str,
    requirement: v1.NodeSelectorRequirement | v1.LabelSelectorRequirement,
    operators: Sequence[str],
) -> None:
    if errors.required(f"{path}.key", requirement.key):
        errors.check(f"{path}.key", validate_label_key(requirement.key))
    operator, values = requirement.operator, list(requirement.values)
    errors.choice(f"{path}.operator", operator, operators)
    if operator in (EXISTS, DOES_NOT_EXIST):
        if values:
            errors.add(f"{path}.values", f"must be empty for operator {operator}, not {len(values)} value(s)")
    elif operator in (GT, LT):
        if len(values) != 1:
            errors.add(f"{path}.values", f"must hold exactly one integer for operator {operator}, not {len(values)}")
        elif as_integer(values[0]) is None:
            errors.add(f"{path}.values[0]", f"must be an integer for operator {operator}, not {quote(values[0])}")
    elif operator in operators:
        if not values:
            errors.add(f"{path}.values", f"at least one value is required for operator {operator}")
        for i, value in enumerate(values):
            errors.check(f"{path}.values[{i}]", validate_label_value(value))


def _project_affinity(errors: Violations, path: str, rules: v1.ProjectAffinity) -> None:
    for i, term in enumerate(rules.required):
        _project_term(errors, f"{path}.required[{i}]", term)
    for i, preferred in enumerate(rules.preferred):
        errors.between(f"{path}.preferred[{i}].weight", preferred.weight, MIN_WEIGHT, MAX_WEIGHT)
        _project_term(errors, f"{path}.preferred[{i}].term", preferred.term)


def _project_term(errors: Violations, path: str, term: v1.ProjectAffinityTerm) -> None:
    label_selector(errors, f"{path}.labelSelector", term.label_selector)
    _topology_key(errors, f"{path}.topologyKey", term.topology_key)


def _topology_key(errors: Violations, path: str, key: str) -> None:
    if errors.required(path, key):
        errors.check(path, validate_label_key(key))


def label_selector(errors: Violations, path: str, selector: v1.LabelSelector) -> None:
    validation.labels(errors, f"{path}.matchLabels", selector.match_labels)
    for i, requirement in enumerate(selector.match_expressions):
        _requirement(errors, f"{path}.matchExpressions[{i}]", requirement, LABEL_OPERATORS)


def _spread(errors: Violations, path: str, constraint: v1.TopologySpreadConstraint) -> None:
    if constraint.max_skew < 1:
        errors.add(f"{path}.maxSkew", f"must be at least 1, not {constraint.max_skew}")
    _topology_key(errors, f"{path}.topologyKey", constraint.topology_key)
    errors.choice(
        f"{path}.whenUnsatisfiable", constraint.when_unsatisfiable, WHEN_UNSATISFIABLE, empty="for DoNotSchedule"
    )
    label_selector(errors, f"{path}.labelSelector", constraint.label_selector)


__all__ = ["label_selector", "placement_rules"]
