"""Validation and defaults declared in a definition (field rules, CEL) against a real etcd and apiserver."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import Invalid
from support.customkinds import define_webfarm, webfarm, webfarm_messages

ON_DELETE = 1  # UpdatePolicy.ON_DELETE of the example


async def _with_rules(
    client: Client,
    rules: Sequence[v1.FieldRule] = (),
    validations: Sequence[v1.ValidationRule] = (),
) -> v1.ResourceDefinition:
    """Define webfarms with `rules` and `validations`."""
    definition = await define_webfarm(client)
    definition.spec.field_rules.extend(rules)
    definition.spec.validations.extend(validations)
    return await client.resourcedefinitions.update(definition)  # replies once this apiserver serves it so


def _fields(info: pytest.ExceptionInfo[Invalid]) -> list[str]:
    return [v.field for v in info.value.violations]


async def test_defaults_are_applied_on_create_and_update(client: Client) -> None:
    await _with_rules(
        client,
        [
            v1.FieldRule(path="spec.replicas", default="2"),
            v1.FieldRule(path="spec.selector", default='{"tier": "web"}'),
        ],
    )
    sets = client.resource(webfarm_messages().WebFarm)
    created = await sets.create(webfarm("web", replicas=0))
    assert created.spec.replicas == 2
    assert dict(created.spec.selector) == {"set": "web"}  # set fields keep their value
    bare = webfarm("bare", replicas=0)
    bare.spec.selector.clear()
    created = await sets.create(bare)
    assert dict(created.spec.selector) == {"tier": "web"}
    created.spec.replicas = 0
    updated = await sets.update(created)
    assert updated.spec.replicas == 2 and updated.metadata.generation == 1  # defaulted back: the spec is unchanged


async def test_field_rules_refuse_with_the_field_path(client: Client) -> None:
    await _with_rules(
        client,
        [
            v1.FieldRule(path="spec.replicas", minimum=1, maximum=10),
            v1.FieldRule(path="spec.template.spec.services[].image", pattern=r"^[a-z0-9./:-]+$", max_length=40),
            v1.FieldRule(path="spec.updatePolicy", enum=["IN_PLACE"]),
            v1.FieldRule(path="spec.selector", min_items=1, max_items=2),
            v1.FieldRule(path="spec.template.spec.services[].name", required=True),
        ],
    )
    m = webfarm_messages()
    sets = client.resource(m.WebFarm)
    good = await sets.create(webfarm("good", replicas=3))
    bad = webfarm("bad", replicas=11, image="Not An Image")
    bad.spec.update_policy = ON_DELETE
    bad.spec.selector.clear()
    bad.spec.template.spec.services.add().image = "busybox"
    with pytest.raises(Invalid) as info:
        await sets.create(bad)
    assert _fields(info) == [
        "spec.replicas",
        "spec.template.spec.services[0].image",
        "spec.updatePolicy",
        "spec.selector",
        "spec.template.spec.services[1].name",
    ]
    assert "11 is more than the maximum 10" in str(info.value)
    assert "'ON_DELETE' is not one of IN_PLACE" in str(info.value).replace('"', "'")
    good.spec.replicas = 0
    with pytest.raises(Invalid) as info:
        await sets.update(good)
    assert _fields(info) == ["spec.replicas"] and "less than the minimum 1" in str(info.value)


async def test_cel_rules_refuse_with_their_message_and_path(client: Client) -> None:
    await _with_rules(
        client,
        validations=[
            v1.ValidationRule(
                rule="self.replicas <= 5 || self.updatePolicy == 'ON_DELETE'",
                message="more than 5 replicas need updatePolicy ON_DELETE",
                field_path="spec.replicas",
            ),
            v1.ValidationRule(rule="self.all(k, k.startsWith('set'))", path="spec.selector"),
            v1.ValidationRule(
                path="spec.template.spec.services[]", rule="size(self.command) > 0", message="no command"
            ),
            v1.ValidationRule(path="spec.replicas", rule="self >= oldSelf", message="replicas may not go down"),
            v1.ValidationRule(path="status", rule="self.readyReplicas <= self.replicas", message="ready > replicas"),
        ],
    )
    m = webfarm_messages()
    sets = client.resource(m.WebFarm)
    bad = webfarm("bad", replicas=6, labels={})
    bad.spec.selector["tier"] = "x"
    del bad.spec.template.spec.services[0].command[:]
    with pytest.raises(Invalid) as info:
        await sets.create(bad)
    assert _fields(info) == ["spec.replicas", "spec.selector", "spec.template.spec.services[0]"]
    assert "more than 5 replicas need updatePolicy ON_DELETE" in str(info.value)
    assert "failed rule: self.all(k, k.startsWith('set'))" in str(info.value)
    bad.spec.update_policy = ON_DELETE
    del bad.spec.selector["tier"]
    bad.spec.template.spec.services[0].command.extend(["sleep", "1"])
    created = await sets.create(bad)  # the transition rule is not checked on create
    created.spec.replicas = 3
    with pytest.raises(Invalid) as info:
        await sets.update(created)
    assert _fields(info) == ["spec.replicas"] and "replicas may not go down" in str(info.value)
    created.spec.replicas = 7
    created = await sets.update(created)
    created.status.replicas, created.status.ready_replicas = 1, 2
    with pytest.raises(Invalid) as info:
        await sets.update_status(created)
    assert _fields(info) == ["status"] and "ready > replicas" in str(info.value)
    created.status.ready_replicas = 1
    assert (await sets.update_status(created)).status.ready_replicas == 1


@pytest.mark.parametrize(
    ("rule", "field", "words"),
    [
        (v1.FieldRule(path="spec.nope"), "spec.fieldRules[0].path", "has no field 'nope'"),
        (v1.FieldRule(path="metadata.name"), "spec.fieldRules[0].path", "must start with spec or status"),
        (v1.FieldRule(path="spec.replicas", pattern="x"), "spec.fieldRules[0]", "need a string field"),
        (v1.FieldRule(path="spec.template.spec.services.image"), "spec.fieldRules[0].path", "services[]"),
        (v1.FieldRule(path="spec.replicas", default='"many"'), "spec.fieldRules[0].default", "is not a value of"),
        (v1.FieldRule(path="spec.updatePolicy", enum=["SOMETIMES"]), "spec.fieldRules[0].enum", "is not a value"),
        (v1.FieldRule(path="spec.selector", pattern="("), "spec.fieldRules[0]", "need a string field"),
        (v1.ValidationRule(rule="self.replicas <"), "spec.validations[0].rule", "does not compile"),
        (v1.ValidationRule(rule="true", path="spec.x"), "spec.validations[0].path", "has no field"),
        (
            v1.AdmissionHook(name="h", type="Validating", url="http://example.com/hook"),
            "spec.admissionHooks[0].url",
            "loopback",
        ),
        (
            v1.AdmissionHook(name="h", type="Sometimes", url="https://example.com/"),
            "spec.admissionHooks[0].type",
            "is not one of",
        ),
    ],
)
async def test_definitions_with_unusable_rules_are_refused(client: Client, rule: Any, field: str, words: str) -> None:
    definition = await define_webfarm(client)
    target = {
        v1.FieldRule: definition.spec.field_rules,
        v1.ValidationRule: definition.spec.validations,
        v1.AdmissionHook: definition.spec.admission_hooks,
    }[type(rule)]
    target.append(rule)
    with pytest.raises(Invalid) as info:
        await client.resourcedefinitions.update(definition)
    assert [v.field for v in info.value.violations] == [field]
    assert words in str(info.value).replace('"', "'")
