"""AdmissionPolicies against a real etcd and apiserver, with a small aiohttp hook server on loopback: hooks for a
built-in kind (projects) that mutate, refuse with a field path, fail with either failure policy, stop when their
policy is deleted, and are applied by a second apiserver on the same etcd."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from caractrl_runner import Caractrl, cli  # noqa: F401 (fixtures)

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import InternalError, Invalid, NotFound
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.ports import free_port
from support.customkinds import define_webfarm, webfarm, webfarm_messages

WITHIN = 1.0  # every apiserver follows a policy's write within a second


@dataclass
class HookServer:
    """Records the name of every object it is asked about; `url(path)` is where its handlers listen."""

    base: str
    seen: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


@pytest.fixture
async def hooks() -> AsyncIterator[HookServer]:
    app = web.Application()
    runner = web.AppRunner(app)
    server: HookServer | None = None

    async def record(request: web.Request) -> dict[str, Any]:
        review: dict[str, Any] = await request.json()
        assert server is not None
        server.seen.append(review["request"]["name"])
        return dict(review["request"])

    async def label(request: web.Request) -> web.Response:
        review = await record(request)
        labels = {**review["object"]["metadata"].get("labels", {}), "admitted": review["operation"].lower()}
        return web.json_response(
            {"allowed": True, "patch": [{"op": "add", "path": "/metadata/labels", "value": labels}]}
        )

    async def deny(request: web.Request) -> web.Response:
        review = await record(request)
        if review["name"].startswith("forbidden"):
            reply = {"allowed": False, "message": "no forbidden projects", "field": "spec.services[0].image"}
            return web.json_response({"response": reply})
        return web.json_response({"response": {"allowed": True}})

    async def mark(request: web.Request) -> web.Response:
        review = await record(request)
        annotations = review["object"]["metadata"].get("annotations", {})
        order = ",".join(filter(None, [annotations.get("order", ""), request.match_info["tag"]]))
        patch = [{"op": "add", "path": "/metadata/annotations", "value": {**annotations, "order": order}}]
        return web.json_response({"allowed": True, "patch": patch})

    app.router.add_post("/mark/{tag}", mark)
    app.router.add_post("/label", label)
    app.router.add_post("/deny", deny)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = HookServer(f"http://127.0.0.1:{runner.addresses[0][1]}")
    try:
        yield server
    finally:
        await runner.cleanup()


def policy(
    name: str, hooks: Sequence[v1.AdmissionHook], resources: Sequence[str] = ("projects",)
) -> v1.AdmissionPolicy:
    obj = meta.with_type_meta(v1.AdmissionPolicy())
    obj.metadata.name = name
    obj.spec.resources.extend(resources)
    obj.spec.hooks.extend(hooks)
    return obj


async def eventually(attempt: Callable[[], Awaitable[None]]) -> None:
    """Run `attempt` until it passes (no AssertionError), at most `WITHIN` s."""
    started = time.monotonic()
    while True:
        try:
            await attempt()
            return
        except AssertionError:
            if time.monotonic() - started > WITHIN:
                raise
            await asyncio.sleep(0.02)


class Names:
    """Fresh project names: every attempt of `eventually` creates a new project."""

    def __init__(self, prefix: str) -> None:
        self._prefix, self._n = prefix, 0

    def __call__(self) -> str:
        self._n += 1
        return f"{self._prefix}-{self._n}"


async def labelled_on_create(client: Client, names: Names) -> None:
    created = await client.projects.create(project(names()))
    assert created.metadata.labels.get("admitted") == "create"


async def test_a_mutating_policy_labels_projects_on_create_and_update(client: Client, hooks: HookServer) -> None:
    await client.admissionpolicies.create(
        policy("label", [v1.AdmissionHook(name="l", type="Mutating", url=hooks.url("/label"))])
    )
    names = Names("web")
    await eventually(lambda: labelled_on_create(client, names))
    stored = await client.projects.get(hooks.seen[-1])
    stored.spec.priority = 5
    updated = await client.projects.update(stored)
    assert updated.metadata.labels["admitted"] == "update" and updated.metadata.generation == 2
    other = await client.configs.create(meta.with_type_meta(v1.Config(metadata=v1.ObjectMeta(name="c"))))
    assert "admitted" not in other.metadata.labels  # only the resources the policy names


async def refused(client: Client, names: Names) -> None:
    name = names()
    try:
        await client.projects.create(project(name))
    except Invalid as exc:
        assert [v.field for v in exc.violations] == ["spec.services[0].image"]
        assert "denied by admission hook deny: no forbidden projects" in str(exc)
        return
    await client.projects.delete(name)
    raise AssertionError("not refused yet")


async def test_a_validating_policy_refuses_with_the_field_path(client: Client, hooks: HookServer) -> None:
    await client.admissionpolicies.create(
        policy("deny", [v1.AdmissionHook(name="deny", type="Validating", url=hooks.url("/deny"))])
    )
    names = Names("forbidden")
    await eventually(lambda: refused(client, names))
    with pytest.raises(NotFound):
        await client.projects.get(hooks.seen[-1])
    assert (await client.projects.create(project("allowed"))).metadata.name == "allowed"


async def test_a_hook_that_is_down_fails_or_is_ignored_by_its_policy(client: Client) -> None:
    down = f"http://127.0.0.1:{free_port()}/nothing"
    ignored = v1.AdmissionHook(name="gone", type="Validating", url=down, failure_policy="Ignore", timeout_seconds=1)
    await client.admissionpolicies.create(policy("ignored", [ignored]))
    assert (await client.projects.create(project("passes"))).metadata.name == "passes"
    failing = v1.AdmissionHook(name="gone", type="Mutating", url=down, failure_policy="Fail", timeout_seconds=1)
    await client.admissionpolicies.create(policy("failing", [failing]))
    names = Names("blocked")

    async def blocked() -> None:
        name = names()
        try:
            await client.projects.create(project(name))
        except InternalError as exc:
            assert 'admission hook "gone" failed' in str(exc)
            return
        await client.projects.delete(name)
        raise AssertionError("not blocked yet")

    await eventually(blocked)
    await client.admissionpolicies.delete("failing")


async def test_a_deleted_policy_is_no_longer_called(client: Client, hooks: HookServer) -> None:
    await client.admissionpolicies.create(
        policy("label", [v1.AdmissionHook(name="l", type="Mutating", url=hooks.url("/label"))])
    )
    names = Names("before")
    await eventually(lambda: labelled_on_create(client, names))
    await client.admissionpolicies.delete("label")
    names = Names("after")

    async def unlabelled() -> None:
        created = await client.projects.create(project(names()))
        assert "admitted" not in created.metadata.labels

    await eventually(unlabelled)
    calls = len(hooks.seen)
    await client.projects.create(project("later"))
    assert len(hooks.seen) == calls


async def test_a_policy_created_through_one_apiserver_is_applied_by_another(
    etcd: EtcdServer, api: RunningApiServer, client: Client, hooks: HookServer
) -> None:
    async with apiserver(etcd.endpoint, prefix=api.prefix) as second, Client(second.address, timeout=10) as other:
        await client.admissionpolicies.create(
            policy("deny", [v1.AdmissionHook(name="deny", type="Validating", url=hooks.url("/deny"))])
        )
        names = Names("forbidden")
        await eventually(lambda: refused(other, names))
        assert [p.metadata.name for p in (await other.admissionpolicies.list()).items] == ["deny"]


async def test_a_policy_is_validated_with_field_paths(client: Client) -> None:
    bad = policy(
        "bad",
        [v1.AdmissionHook(name="h", type="Sometimes", url="http://example.com/x")],
        resources=["admissionpolicies", "leases"],
    )
    with pytest.raises(Invalid) as info:
        await client.admissionpolicies.create(bad)
    fields = [v.field for v in info.value.violations]
    assert fields == ["spec.resources[0]", "spec.resources[1]", "spec.hooks[0].type", "spec.hooks[0].url"]
    assert "too often" in str(info.value)


POLICY = """\
apiVersion: caravanserai/v1
kind: AdmissionPolicy
metadata:
  name: label
spec:
  resources: [projects, secrets]
  hooks:
    - {name: l, type: Mutating, url: "http://127.0.0.1:9/label", failurePolicy: Ignore, timeoutSeconds: 1}
"""


async def test_caractrl_applies_gets_and_describes_policies(cli: Caractrl, tmp_path: Path) -> None:
    manifest = tmp_path / "policy.yaml"
    manifest.write_text(POLICY)
    applied = await cli("apply", "-f", str(manifest))
    assert applied.exit_code == 0, applied.stderr
    listed = await cli("get", "admissionpolicies")
    assert listed.exit_code == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "RESOURCES", "HOOKS", "AGE"]
    assert row.split()[:3] == ["label", "projects,secrets", "l(Mutating)"]
    short = await cli("get", "ap", "label", "-o", "wide")
    assert "http://127.0.0.1:9/label" in short.stdout
    described = await cli("describe", "ap", "label")
    assert described.exit_code == 0 and "AdmissionPolicy" in described.stdout
    deleted = await cli("delete", "admissionpolicy", "label")
    assert deleted.exit_code == 0, deleted.stderr


async def test_the_kinds_own_hooks_run_first_then_policies_by_name(client: Client, hooks: HookServer) -> None:
    definition = await define_webfarm(client)
    definition.spec.admission_hooks.add(name="own", type="Mutating", url=hooks.url("/mark/own"))
    await client.resourcedefinitions.update(definition)
    for name in ("b-second", "a-first"):
        hook = v1.AdmissionHook(name=name, type="Mutating", url=hooks.url(f"/mark/{name}"))
        await client.admissionpolicies.create(policy(name, [hook], resources=["webfarms"]))
    sets = client.resource(webfarm_messages().WebFarm)
    names = Names("ordered")

    async def ordered() -> None:
        created = await sets.create(webfarm(names()))
        assert created.metadata.annotations["order"] == "own,a-first,b-second"

    await eventually(ordered)
