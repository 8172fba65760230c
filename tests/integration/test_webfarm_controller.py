"""The WebFarm example controller in process (informers, work queue, Controller, Manager, EventRecorder on a
custom kind) against a real apiserver, without agents: projects are created from the template, scaled, updated
in place, and removed with the set by the garbage collector through their owner references."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app as gc_app
from caravanserai.errors import NotFound
from caravanserai.testing.wait import wait_for
from support.customkinds import define_webfarm, webfarm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "webfarm" / "webfarm_controller.py"


@pytest.fixture(scope="module")
def operator_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("webfarm_controller", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.asynccontextmanager
async def running(module: ModuleType, client: Client) -> AsyncIterator[None]:
    await define_webfarm(client)  # the deployment installs the definition; the operator only registers
    await module.register_kind(client)
    manager = module.build(client)
    gc = Manager(client, clock=SystemClock(), shutdown_timeout=5.0)  # the cluster's garbage collector
    gc_app.setup(gc, client, SystemClock(), gc_app.GCOptions())
    tasks = [asyncio.create_task(m.run(), name=f"manager-{i}") for i, m in enumerate((manager, gc))]
    try:
        yield
    finally:
        for m in (manager, gc):
            m.stop()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)


async def _names(client: Client) -> list[str]:
    listed = await client.projects.list()
    return sorted(p.metadata.name for p in listed.items if _controller(p) == ("WebFarm", "web"))


def _controller(project: v1.Project) -> tuple[str, str] | None:
    ref = meta.controller_of(project)
    return None if ref is None else (ref.kind, ref.name)


async def test_controller_creates_scales_updates_and_cleans_up(operator_module: ModuleType, client: Client) -> None:
    async with running(operator_module, client):
        sets = client.resource(operator_module.WebFarm)
        web = webfarm("web", replicas=3)
        web.spec.template.labels["tier"] = "front"
        await sets.create(web)

        async def three() -> bool:
            obj = await sets.get("web")
            cond = meta.get_condition(obj.status.conditions, "Ready")
            return (
                await _names(client) == ["web-0", "web-1", "web-2"]
                and obj.status.replicas == 3
                and cond is not None
                and cond.status == v1.FALSE
                and obj.status.observed_generation == 1
            )

        await wait_for(three, timeout=20, message="three projects and a status")
        p = await client.projects.get("web-1")
        assert p.metadata.labels["tier"] == "front" and p.metadata.labels["set"] == "web"
        events = await client.events.list(field_selector="involvedObject.kind=WebFarm,involvedObject.name=web")
        assert sorted(e.spec.message for e in events.items) == [f"created project web-{i}" for i in range(3)]

        obj = await sets.get("web")
        obj.spec.replicas = 1
        obj.spec.template.spec.services[0].image = "caravanserai/busybox:other"
        await sets.update(obj)

        async def scaled_and_updated() -> bool:
            if await _names(client) != ["web-0"]:
                return False
            return (await client.projects.get("web-0")).spec.services[0].image == "caravanserai/busybox:other"

        await wait_for(scaled_and_updated, timeout=20, message="one project with the new template")

        owner = await sets.get("web")
        for name in await _names(client):
            assert meta.is_owned_by(await client.projects.get(name), owner)
        assert not owner.metadata.finalizers  # owned by reference, not by label plus finalizer
        response = await sets.delete("web")
        assert response.deleted  # Background: the set goes at once, the collector deletes its projects

        async def gone() -> bool:
            try:
                await sets.get("web")
            except NotFound:
                return await _names(client) == []
            return False

        await wait_for(gone, timeout=20, message="the set and its projects deleted")


async def test_a_set_marked_by_an_earlier_version_is_released(operator_module: ModuleType, client: Client) -> None:
    await define_webfarm(client)
    sets = client.resource(operator_module.WebFarm)
    old = webfarm("old", replicas=0)
    old.metadata.finalizers.append(operator_module.LEGACY_FINALIZER)  # the label-plus-finalizer era
    await sets.create(old)
    await sets.delete("old")  # marked, waiting for the finalizer
    async with running(operator_module, client):

        async def gone() -> bool:
            try:
                await sets.get("old")
            except NotFound:
                return True
            return False

        await wait_for(gone, timeout=20, message="the legacy finalizer removed and the set gone")
