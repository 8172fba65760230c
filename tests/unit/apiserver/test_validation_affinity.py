"""Validation of spec.affinity and spec.topologySpreadConstraints: a valid manifest passes; each rule has a table row
that breaks it once, refused at its field path."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds import validate_object
from caravanserai.errors import Invalid
from caravanserai.testing.builders import project

NODE = "spec.affinity.nodeAffinity"
ANTI = "spec.affinity.projectAntiAffinity"
SPREAD = "spec.topologySpreadConstraints[0]"
NAME_RULE = "1-63 characters of A-Z, a-z, 0-9, '-', '_' and '.', starting and ending with a letter or digit"


def placed() -> v1.Project:
    """A project using every placement field once, validly."""
    p = project("web", labels={"app": "web"})
    nodes = p.spec.affinity.node_affinity
    nodes.required.add().match_expressions.add(key="disk", operator="In", values=["ssd"])
    nodes.preferred.add(weight=20).preference.match_expressions.add(key="gen", operator="Gt", values=["3"])
    near = p.spec.affinity.project_affinity.preferred.add(weight=100).term
    near.topology_key = "caravanserai.io/zone"
    near.label_selector.match_labels["app"] = "cache"
    apart = p.spec.affinity.project_anti_affinity.required.add(topology_key="caravanserai.io/hostname")
    apart.label_selector.match_expressions.add(key="app", operator="In", values=["web"])
    spread = p.spec.topology_spread_constraints.add(max_skew=1, topology_key="caravanserai.io/zone")
    spread.label_selector.match_labels["app"] = "web"
    return p


Mutation = Callable[[v1.Project], object]


def node_requirement(p: v1.Project) -> v1.NodeSelectorRequirement:
    return p.spec.affinity.node_affinity.required[0].match_expressions[0]


def anti_term(p: v1.Project) -> v1.ProjectAffinityTerm:
    return p.spec.affinity.project_anti_affinity.required[0]


def _set(target: object, **values: object) -> None:
    for name, value in values.items():
        if isinstance(value, list):
            field = getattr(target, name)
            del field[:]
            field.extend(value)
        else:
            setattr(target, name, value)


RULES: list[tuple[Mutation, str, str]] = [
    (lambda p: _set(node_requirement(p), operator="Near"), f"{NODE}.required[0].matchExpressions[0].operator",
     'must be one of "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", not "Near"'),
    (lambda p: _set(node_requirement(p), operator="Gt", values=["three"]),
     f"{NODE}.required[0].matchExpressions[0].values[0]", 'must be an integer for operator Gt, not "three"'),
    (lambda p: _set(node_requirement(p), operator="Lt", values=["1", "2"]),
     f"{NODE}.required[0].matchExpressions[0].values", "must hold exactly one integer for operator Lt, not 2"),
    (lambda p: _set(node_requirement(p), values=[]), f"{NODE}.required[0].matchExpressions[0].values",
     "at least one value is required for operator In"),
    (lambda p: _set(node_requirement(p), operator="Exists"), f"{NODE}.required[0].matchExpressions[0].values",
     "must be empty for operator Exists, not 1 value(s)"),
    (lambda p: _set(node_requirement(p), key="bad key"), f"{NODE}.required[0].matchExpressions[0].key",
     f"name part 'bad key' must be {NAME_RULE}"),
    (lambda p: p.spec.affinity.node_affinity.required.add(), f"{NODE}.required[1].matchExpressions",
     "at least one requirement is required (an empty term matches no node)"),
    (lambda p: _set(p.spec.affinity.node_affinity.preferred[0], weight=101), f"{NODE}.preferred[0].weight",
     "must be between 1 and 100, not 101"),
    (lambda p: _set(p.spec.affinity.project_affinity.preferred[0], weight=0),
     "spec.affinity.projectAffinity.preferred[0].weight", "must be between 1 and 100, not 0"),
    (lambda p: _set(anti_term(p), topology_key=""), f"{ANTI}.required[0].topologyKey", "is required"),
    (lambda p: _set(anti_term(p).label_selector.match_expressions[0], operator="Gt", values=["1"]),
     f"{ANTI}.required[0].labelSelector.matchExpressions[0].operator",
     'must be one of "In", "NotIn", "Exists", "DoesNotExist", not "Gt"'),
    (lambda p: _set(anti_term(p).label_selector.match_expressions[0], values=["not valid!"]),
     f"{ANTI}.required[0].labelSelector.matchExpressions[0].values[0]",
     f"label value 'not valid!' must be empty or {NAME_RULE}"),
    (lambda p: anti_term(p).label_selector.match_labels.update({"app": "a b"}),
     f"{ANTI}.required[0].labelSelector.matchLabels[\"app\"]",
     f"label value 'a b' must be empty or {NAME_RULE}"),
    (lambda p: _set(p.spec.topology_spread_constraints[0], max_skew=0), f"{SPREAD}.maxSkew",
     "must be at least 1, not 0"),
    (lambda p: _set(p.spec.topology_spread_constraints[0], topology_key=""), f"{SPREAD}.topologyKey", "is required"),
    (lambda p: _set(p.spec.topology_spread_constraints[0], when_unsatisfiable="Maybe"), f"{SPREAD}.whenUnsatisfiable",
     'must be one of "DoNotSchedule", "ScheduleAnyway" (or empty for DoNotSchedule), not "Maybe"'),
]  # fmt: skip


def test_every_placement_field_used_validly_passes() -> None:
    validate_object("projects", placed())


@pytest.mark.parametrize(("mutate", "path", "message"), RULES)
def test_rules(mutate: Mutation, path: str, message: str) -> None:
    p = placed()
    mutate(p)
    with pytest.raises(Invalid) as info:
        validate_object("projects", p)
    assert [(v.field, v.description) for v in info.value.violations] == [(path, message)]
