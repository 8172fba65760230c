"""Events filtered by field selectors (involvedObject.kind/name, reason, type) on list and watch, and
`caractrl get events --for KIND/NAME`, against a real etcd and apiserver."""

from __future__ import annotations

import asyncio
import time

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import timestamp
from caravanserai.errors import Invalid


def event(name: str, kind: str, about: str, reason: str, type_: str = "Normal") -> v1.Event:
    obj = meta.with_type_meta(v1.Event())
    obj.metadata.name = name
    obj.spec.involved_object.kind = kind
    obj.spec.involved_object.name = about
    obj.spec.reason = reason
    obj.spec.type = type_
    obj.spec.message = f"{reason} {about}"
    obj.spec.last_timestamp.CopyFrom(timestamp(time.time()))
    return obj


async def _events(client: Client) -> None:
    for obj in (
        event("web.1", "Project", "web", "Scheduled"),
        event("web.2", "Project", "web", "FailedScheduling", "Warning"),
        event("db.1", "Project", "db", "Scheduled"),
        event("web-node.1", "Node", "web", "NodeNotReady", "Warning"),
    ):
        await client.events.create(obj)


def names(objects: object) -> list[str]:
    return sorted(o.metadata.name for o in objects)  # type: ignore[attr-defined]  # objects is a list of messages with metadata, typed object


async def test_list_events_by_involved_object_reason_and_type(client: Client) -> None:
    await _events(client)
    about_web = "involvedObject.kind=Project,involvedObject.name=web"
    assert names(await client.events.list(field_selector=about_web)) == ["web.1", "web.2"]
    assert names(await client.events.list(field_selector="involvedObject.name=web")) == ["web-node.1", "web.1", "web.2"]
    assert names(await client.events.list(field_selector="reason=Scheduled")) == ["db.1", "web.1"]
    assert names(await client.events.list(field_selector="type=Warning,involvedObject.kind!=Node")) == ["web.2"]
    supported = r"supported fields of Project are metadata.name, metadata.namespace, status.nodeRef, status.phase"
    with pytest.raises(Invalid, match=supported):
        await client.projects.list(field_selector="reason=Scheduled")


async def test_watch_events_by_field_selector(client: Client) -> None:
    start = (await client.events.list()).resource_version
    seen: list[str] = []

    async def watch() -> None:
        async for change in client.events.watch(resource_version=start, field_selector="type=Warning"):
            if change.type != v1.BOOKMARK:
                seen.append(change.object.metadata.name)
            if len(seen) == 2:
                return

    watching = asyncio.create_task(watch())
    await _events(client)
    await asyncio.wait_for(watching, 10)
    assert sorted(seen) == ["web-node.1", "web.2"]


async def test_get_events_for_one_object(cli: Caractrl, client: Client) -> None:
    await _events(client)
    result = await cli("get", "events", "--for", "project/web", "-o", "name")
    assert (result.exit_code, sorted(result.stdout.split())) == (0, ["event/web.1", "event/web.2"])
    table = await cli("get", "events", "--for", "node/web")
    assert [line.split()[2] for line in table.stdout.splitlines()[1:]] == ["NodeNotReady"]
    narrowed = await cli("get", "events", "--for", "project/web", "--field-selector", "type=Warning", "-o", "name")
    assert narrowed.stdout.split() == ["event/web.2"]
    wrong = await cli("get", "projects", "--for", "project/web")
    assert wrong.exit_code == 2 and wrong.stderr.startswith("error: --for selects events; use it with `get events`\n")
    bad = await cli("get", "events", "--for", "web")
    assert bad.exit_code == 2 and "resource/name form" in bad.stderr
