"""Bad input of teams (issue #27): a reference to another namespace's object is refused naming each field (a
reference is a name, looked up in the referring object's own namespace; "team-b/db" is no name), and a binding may
name a user or a role that does not exist yet."""

from __future__ import annotations

import asyncio

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Invalid, NotFound
from caravanserai.testing.builders import project


async def test_a_reference_across_namespaces_is_refused_naming_the_field(client: Client) -> None:
    for name in ("team-a", "team-b"):
        await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=name)))
    web = project("web", namespace="team-a")
    service = web.spec.services[0]
    service.env.add(name="PASSWORD", value_from=v1.KeyRef(secret="team-b/db", key="password"))
    service.env_from.add(config="team-b/settings")
    web.spec.image_pull_secrets.append("team-b/registry")
    web.spec.volumes.add(name="certs", type=v1.VOLUME_SECRET, secret="team-b/certs")
    with pytest.raises(Invalid) as refused:
        await client.projects.create(web)
    assert {v.field for v in refused.value.violations} == {
        "spec.services[0].env[0].valueFrom.secret",
        "spec.services[0].envFrom[0].config",
        "spec.imagePullSecrets[0]",
        "spec.volumes[0].secret",
    }
    assert all("cannot cross namespaces" in v.description for v in refused.value.violations)
    binding = meta.with_type_meta(v1.RoleBinding(metadata=v1.ObjectMeta(name="b", namespace="team-a")))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="Role", name="team-b/edit"))
    binding.spec.subjects.add(kind="User", name="alice")
    with pytest.raises(Invalid, match=r"spec\.roleRef\.name"):
        await client.resource(v1.RoleBinding).create(binding)
    with pytest.raises(NotFound):
        await client.projects.get("team-a/web")  # nothing was stored


async def test_a_binding_may_name_a_user_and_a_role_that_do_not_exist_yet(client: Client) -> None:
    await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name="team-c")))
    binding = meta.with_type_meta(v1.RoleBinding(metadata=v1.ObjectMeta(name="future", namespace="team-c")))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="Role", name="not-written-yet"))
    binding.spec.subjects.add(kind="User", name="not-hired-yet")
    await client.resource(v1.RoleBinding).create(binding)  # allowed: it grants nothing until the role exists
    answer = await client.can_i("get", "projects/log", namespace="team-c", user="not-hired-yet")
    assert not answer.allowed
    role = meta.with_type_meta(v1.Role(metadata=v1.ObjectMeta(name="not-written-yet", namespace="team-c")))
    role.spec.rules.add(verbs=["get"], kinds=["projects/log"])
    await client.resource(v1.Role).create(role)
    for _ in range(100):  # the authorizer follows the roles' watch cache
        answer = await client.can_i("get", "projects/log", namespace="team-c", user="not-hired-yet")
        if answer.allowed:
            break
        await asyncio.sleep(0.05)
    assert answer.reason == "allowed by rolebinding team-c/future (role not-written-yet)"
