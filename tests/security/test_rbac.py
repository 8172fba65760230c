"""Roles and bindings against a real apiserver with bearer-token identities: a team lead granted `admin` in one
namespace hands `edit` to a group there and cannot escalate, a developer works in their namespace only, everyone
else views, `can_i` answers from the same code, and the default binding can be switched off."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import tls_for

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Forbidden, Invalid
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer

TOKENS = "admin-token,root,admin\nlead-token,lead\ndev-token,dev,developers\nstranger-token,stranger\n"


@pytest.fixture
async def rbac_api(etcd: EtcdServer, certs: Path, tmp_path: Path) -> AsyncIterator[RunningApiServer]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(TOKENS)
    async with apiserver(etcd.endpoint, tls=tls_for(certs, "apiserver"), token_file=str(tokens)) as running:
        yield running


def _client(api: RunningApiServer, certs: Path, token: str, namespace: str = "default") -> Client:
    # The token names the identity; the certificate only opens the mutual TLS connection.
    tls = TLSFiles(ca=str(certs / "ca.crt"), cert=str(certs / "viewer.crt"), key=str(certs / "viewer.key"))
    return Client(api.address, tls=tls, token=token, namespace=namespace, retry_timeout=1)


def _binding(name: str, namespace: str, role: str, *subjects: tuple[str, str]) -> v1.RoleBinding:
    binding = meta.with_type_meta(v1.RoleBinding(metadata=v1.ObjectMeta(name=name, namespace=namespace)))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name=role))
    for kind, who in subjects:
        binding.spec.subjects.add(kind=kind, name=who)
    return binding


async def _until(client: Client, verb: str, resource: str, *, allowed: bool, namespace: str | None = None) -> None:
    """Wait until the authorizer, which follows the bindings' watch cache, gives this answer (a binding takes effect
    within the cache's latency, as in Kubernetes)."""
    for _ in range(100):
        if (await client.can_i(verb, resource, namespace=namespace)).allowed == allowed:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"can_i {verb} {resource} stayed {not allowed}")


def _secret(name: str) -> v1.Secret:
    secret = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name=name)))
    secret.spec.data["k"] = b"v"
    return secret


async def test_a_team_lead_a_developer_and_a_stranger(rbac_api: RunningApiServer, certs: Path) -> None:
    async with _client(rbac_api, certs, "admin-token") as admin:
        for name in ("team-a", "team-b"):
            await admin.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=name)))
        await admin.resource(v1.RoleBinding).create(_binding("lead", "team-a", "admin", ("User", "lead")))
        bad = v1.Role(metadata=v1.ObjectMeta(name="bad", namespace="team-a"))
        bad.spec.rules.add(verbs=["read"], kinds=["pods"])
        with pytest.raises(Invalid) as info:
            await admin.resource(v1.Role).create(bad)
        assert {v.field for v in info.value.violations} >= {"spec.rules[0].verbs[0]"}
        bad.spec.rules[0].verbs[:] = ["get"]
        with pytest.raises(Invalid, match=r"spec\.rules\[0\]\.kinds\[0\]"):
            await admin.resource(v1.Role).create(bad)

    async with _client(rbac_api, certs, "lead-token", "team-a") as lead:
        await _until(lead, "create", "rolebindings", allowed=True)
        bindings = lead.resource(v1.RoleBinding)
        await bindings.create(_binding("devs", "team-a", "edit", ("Group", "developers"), ("User", "not-yet-hired")))
        with pytest.raises(Forbidden, match="grants what they do not hold in namespace team-a"):
            await bindings.create(_binding("root", "team-a", "cluster-admin", ("User", "lead")))
        with pytest.raises(Forbidden, match="no role bound to lead allows create rolebindings in namespace team-b"):
            await bindings.create(_binding("devs", "team-b", "edit", ("Group", "developers")))

    async with _client(rbac_api, certs, "dev-token", "team-a") as dev:
        await _until(dev, "create", "projects", allowed=True)
        await dev.projects.create(project("web"))
        await dev.secrets.create(_secret("db"))
        assert (await dev.secrets.get("db")).spec.data["k"] == b"v"
        with pytest.raises(Forbidden, match="no role bound to dev allows create projects in namespace team-b"):
            await dev.projects.in_namespace("team-b").create(project("web"))
        with pytest.raises(Forbidden):
            await dev.secrets.list(namespace="team-b")
        assert [meta.key_of(p) for p in await dev.projects.list()] == ["team-a/web"]  # everyone views (default)
        yes = await dev.can_i("create", "projects")
        assert yes.allowed and yes.reason == "allowed by rolebinding team-a/devs (clusterrole edit)"
        no = await dev.can_i("delete", "nodes")
        assert not no.allowed and no.reason == "no role bound to dev allows delete nodes"
        with pytest.raises(Forbidden, match="only an admin"):
            await dev.can_i("get", "secrets", user="lead")

    async with _client(rbac_api, certs, "stranger-token", "team-a") as stranger:
        assert len(await stranger.projects.list()) == 1
        with pytest.raises(Forbidden):
            await stranger.secrets.get("db")
        with pytest.raises(Forbidden):
            await stranger.projects.delete("web")

    async with _client(rbac_api, certs, "admin-token") as admin:
        answer = await admin.can_i("get", "secrets", namespace="team-a", user="stranger")
        assert not answer.allowed
        answer = await admin.can_i("get", "secrets", namespace="team-a", user="someone", groups=["developers"])
        assert answer.allowed
        default = await admin.resource(v1.ClusterRoleBinding).get("authenticated-view")
        default.metadata.annotations["caravanserai.io/autoupdate"] = "false"
        del default.spec.subjects[:]
        await admin.resource(v1.ClusterRoleBinding).update(default)

    async with _client(rbac_api, certs, "stranger-token", "team-a") as stranger:
        await _until(stranger, "list", "projects", namespace="", allowed=False)
        with pytest.raises(Forbidden, match="no role bound to stranger allows list projects in every namespace"):
            await stranger.projects.list()
