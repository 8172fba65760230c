"""Field rules and CEL rules of a definition (`apiserver.kindrules.fieldrules`) on the example WebFarm's classes."""

from __future__ import annotations

from typing import Any

import pytest

from caravanserai import v1
from caravanserai.apiserver.kindrules.fieldrules import KindRules, RuleError, problems
from caravanserai.text.violations import Violations
from support.customkinds import webfarm, webfarm_messages


def _rules(*rules: v1.FieldRule | v1.ValidationRule) -> KindRules:
    spec = v1.ResourceDefinitionSpec()
    for rule in rules:
        (spec.field_rules if isinstance(rule, v1.FieldRule) else spec.validations).append(rule)
    return KindRules(spec, webfarm_messages().WebFarm.DESCRIPTOR)


def _violations(rules: KindRules, obj: Any, scope: str = "spec") -> list[tuple[str, str]]:
    errors = Violations()
    rules.check(errors, obj, scope)
    return [(v.field, v.description) for v in errors.violations]


def test_each_item_of_a_map_is_checked_by_its_key() -> None:
    rules = _rules(
        v1.FieldRule(path="spec.selector[]", pattern="^[a-z]+$"), v1.FieldRule(path="spec.selector", max_items=2)
    )
    obj = webfarm("web")
    obj.spec.selector.update({"a": "ok", "b": "NOT", "c": "x"})
    assert _violations(rules, obj) == [
        ('spec.selector["b"]', '"NOT" does not match "^[a-z]+$"'),
        ("spec.selector", "has 4 items; at most 2 allowed"),
    ]


def test_defaults_fill_only_unset_fields_under_a_set_parent() -> None:
    rules = _rules(
        v1.FieldRule(path="spec.template.labels", default='{"app": "x"}'),
        v1.FieldRule(path="spec.template.spec.services[].image", default='"busybox"'),
        v1.FieldRule(path="spec.updatePolicy", default='"ON_DELETE"'),
    )
    empty = webfarm_messages().WebFarm()
    rules.apply_defaults(empty, "spec")
    assert not empty.spec.HasField("template") and empty.spec.update_policy == 1
    obj = webfarm("web")
    obj.spec.template.spec.services.add(name="second")
    rules.apply_defaults(obj, "spec")
    assert dict(obj.spec.template.labels) == {"app": "x"}
    assert [s.image for s in obj.spec.template.spec.services] == ["caravanserai/busybox:test", "busybox"]


def test_cel_sees_int64_as_numbers_and_reports_evaluation_errors() -> None:
    rules = _rules(
        v1.ValidationRule(path="status", rule="self.observedGeneration < 10", message="too far"),
        v1.ValidationRule(path="status", rule="self.missing == 1"),
    )
    obj = webfarm("web")
    obj.status.observed_generation = 12
    found = _violations(rules, obj, "status")
    assert found[0] == ("status", "too far")
    assert found[1][0] == "status" and "could not be evaluated" in found[1][1]
    assert _violations(rules, obj, "spec") == []
    on_spec = _rules(v1.ValidationRule(rule="self.replicas > 0", message="no replicas"))
    assert _violations(on_spec, webfarm_messages().WebFarm()) == [("spec", "no replicas")]  # an empty spec too


def test_transition_rules_pair_list_items_by_index() -> None:
    rules = _rules(v1.ValidationRule(path="spec.template.spec.services[]", rule="self.name == oldSelf.name"))
    old = webfarm("web")
    new = webfarm("web")
    new.spec.template.spec.services[0].name = "renamed"
    new.spec.template.spec.services.add(name="added")  # no old item: not checked
    errors = Violations()
    rules.check_transition(errors, old, new, "spec")
    assert [v.field for v in errors.violations] == ["spec.template.spec.services[0]"]
    assert _violations(rules, new) == []  # not checked on create


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        (v1.FieldRule(path="spec.selector", default="{"), "spec.fieldRules[0].default"),
        (v1.FieldRule(path="spec.selector[]", default='"x"'), "spec.fieldRules[0].default"),
        (v1.FieldRule(path="spec.replicas[]"), "spec.fieldRules[0].path"),
        (v1.FieldRule(path="spec.selector", enum=["a"]), "spec.fieldRules[0]"),
        (v1.ValidationRule(rule=""), "spec.validations[0].rule"),
        (v1.ValidationRule(rule="true", field_path="x"), "spec.validations[0].fieldPath"),
    ],
)
def test_unusable_rules_are_named(rule: v1.FieldRule | v1.ValidationRule, field: str) -> None:
    spec = v1.ResourceDefinitionSpec()
    (spec.field_rules if isinstance(rule, v1.FieldRule) else spec.validations).append(rule)
    assert [v.field for v in problems(spec, webfarm_messages().WebFarm.DESCRIPTOR)] == [field]
    with pytest.raises(RuleError):
        KindRules(spec, webfarm_messages().WebFarm.DESCRIPTOR)
