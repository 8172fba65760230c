"""The dashboard's namespace picker as data and endpoints: lists filtered by `?namespace=` ("" = every namespace),
project pages addressed by namespace and name, events of same-named objects kept apart, changes naming their
namespace (a FakeClient behind the informers; handlers called directly, the access checks are not in question)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from aiohttp.web import Response

from caravanserai import meta, v1
from caravanserai.clock import SystemClock, timestamp
from caravanserai.dashboard import views
from caravanserai.dashboard.actions import ActionError, Actions
from caravanserai.dashboard.server import Dashboard
from caravanserai.dashboard.state import ClusterView, Subscription
from caravanserai.testing import FakeClient
from caravanserai.testing.builders import project

NOW = 1_800_000_000.0


def placed(name: str, namespace: str, phase: str = v1.RUNNING) -> v1.Project:
    p = project(name)
    p.metadata.namespace = namespace
    p.status.phase = phase
    p.metadata.creation_timestamp.CopyFrom(timestamp(NOW - 60))
    return p


def event_about(name: str, namespace: str, reason: str) -> v1.Event:
    event = meta.with_type_meta(v1.Event())
    event.metadata.name = f"{name}.{reason.lower()}"
    event.metadata.namespace = namespace
    event.spec.involved_object.kind = "Project"
    event.spec.involved_object.name = name
    event.spec.involved_object.namespace = namespace
    event.spec.reason = reason
    event.spec.type = "Normal"
    return event


def test_projects_view_shows_every_namespace_by_default_or_one() -> None:
    projects = [placed("web", "team-b"), placed("web", "team-a"), placed("api", "team-a")]
    every = views.projects_view(projects, NOW)["projects"]
    assert [(r["namespace"], r["name"]) for r in every] == [("team-a", "api"), ("team-a", "web"), ("team-b", "web")]
    one = views.projects_view(projects, NOW, namespace="team-b")["projects"]
    assert [(r["namespace"], r["name"]) for r in one] == [("team-b", "web")]


def test_project_page_shows_only_its_own_namespaces_events() -> None:
    events = [event_about("web", "team-a", "Started"), event_about("web", "team-b", "Pulled")]
    page = views.project_view(placed("web", "team-b"), None, events, NOW)
    assert [e["reason"] for e in page["events"]] == ["Pulled"]
    assert page["namespace"] == "team-b"


def test_events_and_kind_tables_filter_by_namespace() -> None:
    events = [event_about("web", "team-a", "Started"), event_about("web", "team-b", "Pulled")]
    assert [e["reason"] for e in views.events_view(events, NOW, namespace="team-a")["events"]] == ["Started"]
    table = views.kind_table(meta.KINDS["projects"], [placed("web", "team-a"), placed("web", "team-b")], NOW)
    assert [(r["namespace"], r["name"]) for r in table["rows"]] == [("team-a", "web"), ("team-b", "web")]
    assert table["namespaced"] is True
    only = views.kind_table(meta.KINDS["projects"], [placed("web", "team-a")], NOW, namespace="team-b")
    assert only["rows"] == []


async def test_changes_name_their_namespace_and_keep_same_names_apart() -> None:
    subscription = Subscription()
    subscription.add("projects", "MODIFIED", "team-a/web")
    subscription.add("projects", "ADDED", "team-b/web")
    subscription.add("nodes", "MODIFIED", "n1")
    update = await subscription.next(clock=SystemClock(), coalesce=0.0, timeout=1.0)
    assert update is not None
    assert update.objects == [
        {"resource": "nodes", "namespace": "", "name": "n1", "type": "MODIFIED"},
        {"resource": "projects", "namespace": "team-a", "name": "web", "type": "MODIFIED"},
        {"resource": "projects", "namespace": "team-b", "name": "web", "type": "ADDED"},
    ]


@pytest.fixture
async def dashboard() -> AsyncIterator[Dashboard]:
    client = FakeClient()
    for namespace in ("team-a", "team-b"):
        ns = meta.with_type_meta(v1.Namespace())
        ns.metadata.name = namespace
        await client.namespaces.create(ns)
        await client.projects.create(placed("web", namespace))
    state = ClusterView(client, clock=SystemClock())
    running = asyncio.create_task(state.run())
    try:
        await asyncio.wait_for(state.wait_synced("projects", "namespaces"), 10)
        yield Dashboard(state, Actions(client, read_only=False, clock=SystemClock()), None, server="fake", access=None)  # type: ignore[arg-type]  # logs and access are not used by the handlers called here
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


def body(response: Response) -> Any:
    assert response.text is not None
    return json.loads(response.text)


async def test_endpoints_take_a_namespace(dashboard: Dashboard) -> None:
    every = body(await dashboard.projects(make_mocked_request("GET", "/api/v1/projects")))
    assert [(p["namespace"], p["name"]) for p in every["projects"]] == [("team-a", "web"), ("team-b", "web")]
    one = body(await dashboard.projects(make_mocked_request("GET", "/api/v1/projects?namespace=team-b")))
    assert [p["namespace"] for p in one["projects"]] == ["team-b"]
    names = body(await dashboard.namespaces(make_mocked_request("GET", "/api/v1/namespaces")))
    assert [n["name"] for n in names["namespaces"]] == ["team-a", "team-b"]
    path = "/api/v1/namespaces/team-b/projects/web"
    page = body(
        await dashboard.project(make_mocked_request("GET", path, match_info={"namespace": "team-b", "name": "web"}))
    )
    assert page["namespace"] == "team-b"
    with pytest.raises(ActionError, match='not found in namespace "default"'):
        await dashboard.project(make_mocked_request("GET", "/api/v1/projects/web", match_info={"name": "web"}))


async def test_delete_addresses_one_namespace(dashboard: Dashboard) -> None:
    path = "/api/v1/namespaces/team-a/projects/web"
    request = make_mocked_request("DELETE", path, match_info={"namespace": "team-a", "name": "web"})
    assert body(await dashboard.delete_project(request))["object"] == "project/web"
    client = dashboard.state.client
    assert [meta.key_of(p) for p in await client.projects.list()] == ["team-b/web"]
