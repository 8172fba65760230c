"""AdmissionPolicy: who may write it (admin only; everyone reads), its rules, and the order its hooks run in."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds
from caravanserai.apiserver.kinds.admissionpolicy import STRATEGY
from caravanserai.errors import Forbidden, Invalid
from caravanserai.process.identity import Identity


def policy(*resources: str) -> v1.AdmissionPolicy:
    obj = meta.with_type_meta(v1.AdmissionPolicy())
    obj.metadata.name = "p"
    obj.spec.resources.extend(resources)
    obj.spec.hooks.add(name="h", type="Validating", url="https://hooks.example.com/check")
    return obj


@pytest.mark.parametrize("user", ["alice", "controller:gc", "node:n1"])
@pytest.mark.parametrize("verb", ["create", "update", "delete"])
def test_only_admin_writes_policies(user: str, verb: str) -> None:
    authz = Authorizer(builtin_kinds())
    with pytest.raises(Forbidden):
        authz.check(Identity(user), verb, "admissionpolicies", name="p", obj=policy("projects"))
    authz.check(Identity("admin", frozenset({"admin"})), verb, "admissionpolicies", name="p", obj=policy("projects"))


@pytest.mark.parametrize("user", ["alice", "controller:gc", "node:n1"])
@pytest.mark.parametrize("verb", ["get", "list", "watch"])
def test_everyone_reads_policies(user: str, verb: str) -> None:
    Authorizer(builtin_kinds()).check(Identity(user), verb, "admissionpolicies", name="p" if verb == "get" else "")


@pytest.mark.parametrize(
    ("resources", "field", "says"),
    [
        (["admissionpolicies"], "spec.resources[0]", "may not hook admissionpolicies"),
        (["projects", "leases"], "spec.resources[1]", "too often"),
        (["events"], "spec.resources[0]", "too often"),
        (["projects", "projects"], "spec.resources[1]", "named twice"),
        (["Projects!"], "spec.resources[0]", ""),
        ([], "spec.resources", "is required"),
    ],
)
def test_bad_resources_are_refused_with_the_field_path(resources: list[str], field: str, says: str) -> None:
    with pytest.raises(Invalid) as info:
        STRATEGY.validate(policy(*resources))
    assert [v.field for v in info.value.violations] == [field]
    assert says in str(info.value)


def test_hooks_are_checked_as_a_definitions_are_under_spec_hooks() -> None:
    obj = policy("projects", "secrets", "backups")  # a custom kind's plural may be named before it is defined
    STRATEGY.validate(obj)
    obj.spec.hooks.add(name="h", type="Mutating", url="http://example.com/x", failure_policy="Maybe")
    with pytest.raises(Invalid) as info:
        STRATEGY.validate(obj)
    assert [v.field for v in info.value.violations] == [
        "spec.hooks[1].name",
        "spec.hooks[1].failurePolicy",
        "spec.hooks[1].url",
    ]
    del obj.spec.hooks[:]
    with pytest.raises(Invalid) as info:
        STRATEGY.validate(obj)
    assert [v.field for v in info.value.violations] == ["spec.hooks"]
