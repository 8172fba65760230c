"""A controller process keeps what its caches held at sync out of the garbage collector's passes."""

from __future__ import annotations

import asyncio
import gc

from caravanserai import v1
from caravanserai.controller import Manager
from caravanserai.controllers.process import freeze_when_synced
from caravanserai.testing import FakeClient, running
from caravanserai.testing.builders import project


async def test_the_cached_objects_are_frozen_once_the_caches_synced() -> None:
    client = FakeClient()
    await client.projects.create(project("cached"))
    manager = Manager(client)
    informer = manager.informers.informer(v1.Project)
    gc.unfreeze()
    try:
        freezing = asyncio.create_task(freeze_when_synced(manager))
        await asyncio.sleep(0.05)
        assert not freezing.done() and gc.get_freeze_count() == 0  # not before the caches are filled
        held_before = [informer]  # stands for what the caches and handlers hold at sync
        async with running(manager):
            await asyncio.wait_for(freezing, 10)
            made_after = [informer.get("cached")]
            assert gc.get_freeze_count() > 0
            tracked = {id(obj) for obj in gc.get_objects()}  # the objects the collector's passes walk
            assert id(held_before) not in tracked and id(made_after) in tracked
    finally:
        gc.unfreeze()
