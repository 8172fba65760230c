"""The garbage collector under a `controller:*` identity, against a real apiserver over mutual TLS: it may delete
dependents and release owners on every kind (Configs and project updates included, which controllers otherwise
may not write), and nothing more."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app
from caravanserai.errors import Forbidden, NotFound
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for


def config(name: str, owner: Any | None = None) -> v1.Config:
    c = meta.with_type_meta(v1.Config())
    c.metadata.name = name
    c.spec.data["k"] = "v"
    if owner is not None:
        meta.set_owner(c, owner)
    return c


@contextlib.asynccontextmanager
async def collector(client: Client) -> AsyncIterator[None]:
    manager = Manager(client, clock=SystemClock(), shutdown_timeout=5.0)
    app.setup(manager, client, SystemClock(), app.GCOptions(owner_resync=0.2))
    task = asyncio.create_task(manager.run(), name="gc-under-controller-identity")
    try:
        yield
    finally:
        manager.stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


async def gone(client: Client, plural: str, name: str) -> bool:
    try:
        await client.resource(plural).get(name)
    except NotFound:
        return True
    return False


async def test_a_controller_identity_collects_and_releases_on_every_kind(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with (
        Client(secure_api.address, tls=tls_of("admin"), timeout=10) as admin,
        Client(secure_api.address, tls=tls_of("controller:manager"), timeout=10) as controller,
    ):
        first = await admin.projects.create(project("first"))
        await admin.configs.create(config("first-conf", first))
        second = await admin.projects.create(project("second"))
        await admin.configs.create(config("second-conf", second))
        await admin.configs.create(config("unowned"))
        with pytest.raises(Forbidden):
            await controller.configs.delete("unowned")  # not a dependent: not the collector's
        changed = await controller.configs.get("second-conf")
        changed.spec.data["k"] = "other"
        meta.remove_owner(changed, second.metadata.uid)
        with pytest.raises(Forbidden):
            await controller.configs.update(changed)  # more than a release
        async with collector(controller):
            await admin.projects.delete("first")
            await admin.projects.delete("second", propagation_policy=meta.PROPAGATION_ORPHAN)
            await wait_for(lambda: gone(admin, "configs", "first-conf"), 10)
            await wait_for(lambda: gone(admin, "projects", "second"), 10)  # its orphan finalizer dropped
        kept = await admin.configs.get("second-conf")
        assert list(kept.metadata.owner_references) == [] and kept.spec.data["k"] == "v"
