"""Who may read Secrets (admin, controllers, a node running a project that references them) and Configs, against
a real apiserver over mutual TLS."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Forbidden
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import node, project
from caravanserai.testing.wait import wait_for

Op = Callable[[Client], Awaitable[Any]]


def secret(name: str, **data: bytes) -> v1.Secret:
    s = meta.with_type_meta(v1.Secret())
    s.metadata.name = name
    s.spec.data.update(data)
    return s


def config(name: str, **data: str) -> v1.Config:
    c = meta.with_type_meta(v1.Config())
    c.metadata.name = name
    c.spec.data.update(data)
    return c


async def _setup(admin: Client) -> None:
    await admin.nodes.create(node("n1"))
    await admin.secrets.create(secret("used", password=b"s3cret"))
    await admin.secrets.create(secret("unused", password=b"other"))
    await admin.configs.create(config("settings", mode="fast"))
    await admin.configs.create(config("elsewhere", mode="slow"))
    p = project("app")
    p.spec.services[0].env.add(name="PASSWORD", value_from=v1.KeyRef(secret="used", key="password"))
    p.spec.services[0].env_from.add(config="settings")
    p = await admin.projects.create(p)
    p.status.phase, p.status.node_ref = v1.SCHEDULED, "n1"
    await admin.projects.update_status(p)


async def _names(c: Client, resource: str) -> list[str]:
    return sorted(o.metadata.name for o in await c.resource(resource).list())


async def _watched(c: Client, resource: str) -> list[str]:
    names: list[str] = []
    async for change in c.resource(resource).watch(resource_version="0"):
        if change.type == v1.BOOKMARK:
            break
        names.append(change.object.metadata.name)
    return sorted(names)


def _ops() -> dict[str, Op]:
    return {
        "get used secret": lambda c: c.secrets.get("used"),
        "get unused secret": lambda c: c.secrets.get("unused"),
        "list secrets": lambda c: _names(c, "secrets"),
        "create secret": lambda c: c.secrets.create(secret("new", k=b"v")),
        "get used config": lambda c: c.configs.get("settings"),
        "get unused config": lambda c: c.configs.get("elsewhere"),
        "list configs": lambda c: _names(c, "configs"),
    }


ALLOWED: dict[str, set[str] | None] = {
    "admin": None,
    "controller:manager": {
        "get used secret",
        "get unused secret",
        "list secrets",
        "get used config",
        "get unused config",
        "list configs",
    },
    "node:n1": {"get used secret", "list secrets", "get used config", "list configs"},
    "node:n2": {"list secrets", "list configs"},  # lists are allowed, and empty
    "viewer": {"get used config", "get unused config", "list configs"},
}
SEEN = {  # what each identity's list of secrets and configs holds
    "admin": (["new", "unused", "used"], ["elsewhere", "settings"]),  # admin created "new"
    "controller:manager": (["unused", "used"], ["elsewhere", "settings"]),
    "node:n1": (["used"], ["settings"]),
    "node:n2": ([], []),
    "viewer": (None, ["elsewhere", "settings"]),
}


@pytest.mark.parametrize("identity", sorted(ALLOWED))
async def test_secret_authorization(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles], identity: str
) -> None:
    async with Client(secure_api.address, tls=tls_of("admin")) as admin:
        await _setup(admin)
        async with Client(secure_api.address, tls=tls_of(identity), retry_timeout=1) as c:
            if identity.startswith("node:"):  # the binding must have reached the apiserver's projects cache
                await wait_for(lambda: _can_read(c, identity), timeout=10)
            allowed = ALLOWED[identity]
            for label, op in _ops().items():
                if allowed is None or label in allowed:
                    await asyncio.wait_for(op(c), 10)
                else:
                    with pytest.raises(Forbidden):
                        await asyncio.wait_for(op(c), 10)
            secrets, configs = SEEN[identity]
            if secrets is not None:
                assert await _names(c, "secrets") == secrets
                assert await asyncio.wait_for(_watched(c, "secrets"), 10) == secrets
            assert await _names(c, "configs") == configs


async def _can_read(c: Client, identity: str) -> bool:
    if identity != "node:n1":
        return True
    try:
        await c.secrets.get("used")
    except Forbidden:
        return False
    return True


async def test_node_loses_access_when_the_project_leaves(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with (
        Client(secure_api.address, tls=tls_of("admin")) as admin,
        Client(secure_api.address, tls=tls_of("node:n1"), retry_timeout=1) as n1,
    ):
        await _setup(admin)
        await wait_for(lambda: _can_read(n1, "node:n1"), timeout=10)
        changes: asyncio.Queue[str] = asyncio.Queue()

        async def follow() -> None:
            async for change in n1.secrets.watch(resource_version="0"):
                if change.type != v1.BOOKMARK:
                    await changes.put(
                        f"{change.type} {change.object.metadata.name} "
                        f"{change.object.spec.data.get('password', b'').decode()}"
                    )

        watching = asyncio.create_task(follow())
        try:
            assert await asyncio.wait_for(changes.get(), 10) == "ADDED used s3cret"
            unused = await admin.secrets.get("unused")
            unused.spec.data["password"] = b"changed"
            await admin.secrets.update(unused)  # not referenced: n1 never hears of it
            used = await admin.secrets.get("used")
            used.spec.data["password"] = b"rotated"
            await admin.secrets.update(used)
            assert await asyncio.wait_for(changes.get(), 10) == "MODIFIED used rotated"
        finally:
            watching.cancel()
        await admin.projects.delete("app", force=True)

        async def refused() -> bool:
            try:
                await n1.secrets.get("used")
            except Forbidden:
                return True
            return False

        await wait_for(refused, timeout=10)
