"""Deleting a ResourceDefinition whose objects hold finalizers, against a real etcd and apiserver: the objects are
marked and their finalizers run, the definition goes with the last of them, `caractrl delete rd` says how many it
waits for, and an operator's /readyz turns false while its watches of the kind fail."""

from __future__ import annotations

import asyncio
import time

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai.client import Client
from caravanserai.controller import Manager
from caravanserai.errors import FailedPrecondition, Invalid, NotFound
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for
from support.customkinds import define_webfarm, webfarm, webfarm_messages

FINALIZER = "example.com/cleanup"
DEFINITION = "webfarms.example.com"


async def _create(client: Client, name: str, *, finalizer: bool) -> None:
    obj = webfarm(name)
    if finalizer:
        obj.metadata.finalizers.append(FINALIZER)
    await client.resource(webfarm_messages().WebFarm).create(obj)


async def _release(client: Client, name: str) -> None:
    sets = client.resource(webfarm_messages().WebFarm)
    obj = await sets.get(name)
    obj.metadata.finalizers.remove(FINALIZER)
    await sets.update(obj)


async def _gone(client: Client) -> bool:
    try:
        await client.resourcedefinitions.get(DEFINITION)
    except NotFound:
        return True
    return False


async def test_deleting_a_definition_lets_finalizers_run_and_goes_with_the_last_object(client: Client) -> None:
    await define_webfarm(client)
    await _create(client, "a", finalizer=True)
    await _create(client, "b", finalizer=True)
    await _create(client, "c", finalizer=False)
    sets = client.resource(webfarm_messages().WebFarm)

    response = await client.resourcedefinitions.delete(DEFINITION)
    assert not response.deleted
    left = {o.metadata.name: o for o in (await sets.list()).items}
    assert sorted(left) == ["a", "b"]  # c held no finalizer: removed at once
    assert all(o.metadata.HasField("deletion_timestamp") for o in left.values())
    assert (await client.resourcedefinitions.get(DEFINITION)).metadata.HasField("deletion_timestamp")
    with pytest.raises(FailedPrecondition, match="is being deleted"):
        await _create(client, "d", finalizer=False)

    await _release(client, "a")  # the operator's cleanup, then its finalizer goes
    await asyncio.sleep(0.3)
    assert not await _gone(client)
    await _release(client, "b")
    await wait_for(lambda: _gone(client), timeout=5, message="the definition went with its last object")
    deadline = time.monotonic() + 5
    while True:
        try:
            await sets.list()
        except Invalid:
            break
        assert time.monotonic() < deadline, "the kind is still served 5 s after its definition went"
        await asyncio.sleep(0.05)


async def test_delete_rd_says_how_many_objects_wait_on_finalizers(cli: Caractrl, client: Client) -> None:
    await define_webfarm(client)
    for name in ("a", "b", "c"):
        await _create(client, name, finalizer=True)
    result = await cli("delete", "rd", DEFINITION)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"resourcedefinition/{DEFINITION} marked for deletion "
        "(3 object(s) of its kind waiting on finalizers; removed when the last is gone)\n"
    )


async def test_readyz_is_false_while_the_watches_of_a_kind_fail(client: Client) -> None:
    await define_webfarm(client)
    manager = Manager(client)
    manager.informers.informer(webfarm_messages().WebFarm)
    async with running(manager):
        await wait_for(lambda: manager.readyz()[0] == 200, timeout=10, message="ready once synced")
        await client.resourcedefinitions.delete(DEFINITION, force=True)
        await wait_for(lambda: manager.readyz()[0] == 503, timeout=10, message="not ready while the watch fails")
        _, _, body = manager.readyz()
        assert "watches failing: webfarms" in body, body
        await define_webfarm(client)
        await wait_for(lambda: manager.readyz()[0] == 200, timeout=30, message="ready again once the kind is back")
