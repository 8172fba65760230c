"""Admission hooks of a custom kind against a real etcd and apiserver, with a small aiohttp hook server on
loopback: mutating hooks (JSON patch, changed object), validating hooks, timeouts, failure policies, HTTPS with a
CA bundle."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import InternalError, Invalid, NotFound
from caravanserai.testing.ports import free_port
from support.customkinds import define_webfarm, webfarm, webfarm_messages


@dataclass
class HookServer:
    """Records every review it receives; `url(path)` is where its handlers listen."""

    base: str
    reviews: list[dict[str, Any]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


def _reply(body: dict[str, Any]) -> web.Response:
    return web.json_response({"response": body})


@pytest.fixture
async def hooks() -> AsyncIterator[HookServer]:
    app = web.Application()
    runner = web.AppRunner(app)
    server: HookServer | None = None

    async def record(request: web.Request) -> dict[str, Any]:
        review: dict[str, Any] = await request.json()
        assert server is not None
        server.reviews.append(review)
        return dict(review["request"])

    async def label(request: web.Request) -> web.Response:
        review = await record(request)
        labels = {**review["object"]["metadata"].get("labels", {}), "admitted": review["operation"].lower()}
        patch: list[dict[str, Any]] = [{"op": "add", "path": "/metadata/labels", "value": labels}]
        if not review["object"]["spec"].get("replicas"):
            patch.append({"op": "add", "path": "/spec/replicas", "value": 4})
        return _reply({"allowed": True, "patch": patch})

    async def whole(request: web.Request) -> web.Response:
        review = await record(request)
        obj = review["object"]
        obj["spec"]["selector"] = {**obj["spec"].get("selector", {}), "by": "hook"}
        obj["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"  # not kept: only spec, labels, annotations
        return _reply({"allowed": True, "object": obj})

    async def deny(request: web.Request) -> web.Response:
        review = await record(request)
        if review["name"].startswith("forbidden"):
            return _reply({"allowed": False, "message": "names starting with forbidden are", "field": "metadata.name"})
        if review["operation"] == "UPDATE" and review["object"]["spec"]["replicas"] > 5:
            return _reply({"allowed": False, "message": "at most 5 on update", "field": "spec.replicas"})
        return _reply({"allowed": True})

    async def slow(request: web.Request) -> web.Response:
        await record(request)
        await asyncio.sleep(5)
        return _reply({"allowed": True})

    async def broken(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=500, text="oops")

    for path, handler in {"/label": label, "/whole": whole, "/deny": deny, "/slow": slow, "/broken": broken}.items():
        app.router.add_post(path, handler)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server = HookServer(f"http://127.0.0.1:{port}")
    try:
        yield server
    finally:
        await runner.cleanup()


async def _define(client: Client, hooks: Sequence[v1.AdmissionHook]) -> None:
    definition = await define_webfarm(client)
    definition.spec.admission_hooks.extend(hooks)
    await client.resourcedefinitions.update(definition)


async def test_mutating_hooks_change_the_object_before_validation(client: Client, hooks: HookServer) -> None:
    await _define(
        client,
        [
            v1.AdmissionHook(name="label", type="Mutating", url=hooks.url("/label")),
            v1.AdmissionHook(name="whole", type="Mutating", url=hooks.url("/whole"), operations=["CREATE"]),
        ],
    )
    sets = client.resource(webfarm_messages().WebFarm)
    created = await sets.create(webfarm("web", replicas=0))
    assert created.metadata.labels["admitted"] == "create" and created.spec.replicas == 4
    assert created.spec.selector["by"] == "hook"
    assert created.metadata.uid != "00000000-0000-0000-0000-000000000000"
    assert [r["request"]["operation"] for r in hooks.reviews] == ["CREATE", "CREATE"]
    assert hooks.reviews[0]["request"]["kind"] == "WebFarm" and hooks.reviews[0]["request"]["oldObject"] is None
    created.spec.replicas = 2
    updated = await sets.update(created)
    assert updated.metadata.labels["admitted"] == "update" and updated.metadata.generation == 2
    assert [r["request"]["operation"] for r in hooks.reviews][2:] == ["UPDATE"]  # whole: CREATE only
    assert hooks.reviews[2]["request"]["oldObject"]["spec"]["replicas"] == 4


async def test_validating_hooks_refuse_with_the_field_path(client: Client, hooks: HookServer) -> None:
    await _define(client, [v1.AdmissionHook(name="deny", type="Validating", url=hooks.url("/deny"))])
    sets = client.resource(webfarm_messages().WebFarm)
    with pytest.raises(Invalid) as info:
        await sets.create(webfarm("forbidden-one"))
    assert [v.field for v in info.value.violations] == ["metadata.name"]
    assert "denied by admission hook deny: names starting with forbidden are" in str(info.value)
    with pytest.raises(NotFound):
        await sets.get("forbidden-one")
    created = await sets.create(webfarm("web", replicas=2))
    created.spec.replicas = 6
    with pytest.raises(Invalid) as info:
        await sets.update(created)
    assert [v.field for v in info.value.violations] == ["spec.replicas"]
    assert (await sets.get("web")).spec.replicas == 2


async def test_failure_policies(client: Client, hooks: HookServer) -> None:
    closed = f"http://127.0.0.1:{free_port()}/gone"
    await _define(
        client,
        [
            v1.AdmissionHook(name="gone", type="Validating", url=closed, failure_policy="Ignore"),
            v1.AdmissionHook(name="slow", type="Validating", url=hooks.url("/slow"), timeout_seconds=0.3),
        ],
    )
    sets = client.resource(webfarm_messages().WebFarm)
    with pytest.raises(InternalError) as info:
        await sets.create(webfarm("web"))
    assert "admission hook 'slow' failed: no answer within 0.3 s" in str(info.value).replace('"', "'")
    definition = await client.resourcedefinitions.get("webfarms.example.com")
    del definition.spec.admission_hooks[1:]
    definition.spec.admission_hooks.add(name="broken", type="Mutating", url=hooks.url("/broken"))
    await client.resourcedefinitions.update(definition)
    with pytest.raises(InternalError) as info:
        await sets.create(webfarm("web"))
    assert "admission hook 'broken' failed: answered HTTP 500" in str(info.value).replace('"', "'")
    definition = await client.resourcedefinitions.get("webfarms.example.com")
    definition.spec.admission_hooks[1].failure_policy = "Ignore"
    await client.resourcedefinitions.update(definition)
    assert (await sets.create(webfarm("web"))).metadata.name == "web"  # both failing hooks ignored


def _self_signed(tmp_path: Path) -> tuple[ssl.SSLContext, str]:
    """A server TLS context for 127.0.0.1 and the PEM of its (self-signed) certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hook")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    (tmp_path / "hook.crt").write_text(pem)
    (tmp_path / "hook.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "hook.crt", tmp_path / "hook.key")
    return context, pem


async def test_https_hooks_are_trusted_through_their_ca_bundle(client: Client, tmp_path: Path) -> None:
    context, pem = _self_signed(tmp_path)

    async def deny(request: web.Request) -> web.Response:
        return _reply({"allowed": False, "message": "over TLS", "field": "spec.replicas"})

    app = web.Application()
    app.router.add_post("/deny", deny)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        url = f"https://127.0.0.1:{runner.addresses[0][1]}/deny"
        await _define(client, [v1.AdmissionHook(name="tls", type="Validating", url=url)])
        sets = client.resource(webfarm_messages().WebFarm)
        with pytest.raises(InternalError) as failed:  # the system trust store does not know the certificate
            await sets.create(webfarm("web"))
        assert "admission hook 'tls' failed" in str(failed.value).replace('"', "'")
        definition = await client.resourcedefinitions.get("webfarms.example.com")
        definition.spec.admission_hooks[0].ca_bundle = pem
        await client.resourcedefinitions.update(definition)
        with pytest.raises(Invalid) as refused:
            await sets.create(webfarm("web"))
        assert [v.field for v in refused.value.violations] == ["spec.replicas"] and "over TLS" in str(refused.value)
    finally:
        await runner.cleanup()
