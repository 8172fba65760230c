"""cara-dashboard's JSON endpoints, change stream and actions, over a real apiserver and etcd (no browser here:
tests/e2e/test_dashboard_browser.py drives the page in Chromium)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.testing import free_port
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import node, node_status, project
from caravanserai.testing.wait import wait_for
from support.customkinds import define_webfarm, webfarm, webfarm_messages
from support.dashboard import RunningDashboard, dashboard

NODE = "dash-node"


@pytest.fixture
async def cluster(api: RunningApiServer) -> AsyncIterator[Client]:
    """A Ready node with 4 cpu, a project bound to it requesting 500m, and a Pending one labelled tier=db."""
    async with Client(api.address) as c:
        created = await c.nodes.create(node(NODE, labels={"zone": "a"}))
        node_status(created)
        await c.nodes.update_status(created)
        bound = await c.projects.create(
            project("web", requests={"cpu": "500m", "memory": "1Gi"}, labels={"app": "web"})
        )
        bound.status.node_ref = NODE
        meta.set_phase(bound, v1.SCHEDULED, reason="Scheduled", message="", now=SystemClock().now())
        await c.projects.update_status(bound)
        waiting = await c.projects.create(project("db", labels={"tier": "db"}))
        meta.set_condition(
            waiting.status.conditions,
            v1.CONDITION_SCHEDULED,
            v1.FALSE,
            reason="Unschedulable",
            message="0/1 nodes fit: 1 insufficient cpu",
            now=SystemClock().now(),
        )
        await c.projects.update_status(waiting)
        yield c


@pytest.fixture
async def dash(api: RunningApiServer, cluster: Client) -> AsyncIterator[RunningDashboard]:
    async with dashboard(api.address) as running:
        yield running


async def get(d: RunningDashboard | str, path: str) -> tuple[int, Any]:
    base = d if isinstance(d, str) else d.url
    headers = {} if isinstance(d, str) else d.headers
    try:
        async with aiohttp.ClientSession(headers=headers) as s, s.get(base + path.lstrip("/")) as r:
            return r.status, await r.json()
    except aiohttp.ClientConnectionError:
        return 0, None  # not listening yet


async def send(d: RunningDashboard, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
    if body is None and method == "POST":
        body = {}  # a POST is refused unless it is JSON
    async with d.session() as s, s.request(method, d.url + path.lstrip("/"), json=body, **kwargs) as r:
        return r.status, await r.json()


async def eventually(d: RunningDashboard | str, path: str, check: Any, timeout: float = 5) -> Any:
    async def ready() -> Any:
        status, body = await get(d, path)
        return body if status == 200 and check(body) else None

    return await wait_for(ready, timeout, message=f"{path} as expected")


async def test_cluster_page_data(dash: RunningDashboard) -> None:
    body = await eventually(dash, "/api/v1/cluster", lambda b: b["nodes"] and b["nodes"][0]["projects"])
    (n,) = body["nodes"]
    assert n["name"] == NODE and n["state"] == v1.NODE_READY and n["schedulable"] is True
    resources = {r["name"]: r for r in n["resources"]}
    assert resources["cpu"] == {"name": "cpu", "allocatable": 4.0, "requested": 0.5}
    assert resources["memory"]["requested"] == 1024**3
    assert n["projects"] == ["web"]
    assert body["phases"] == {"Scheduled": 1, "Pending": 1}


async def test_projects_filters_and_pending_reason(dash: RunningDashboard) -> None:
    body = await eventually(dash, "/api/v1/projects", lambda b: len(b["projects"]) == 2)
    rows = {p["name"]: p for p in body["projects"]}
    assert rows["web"]["node"] == NODE and rows["web"]["ready"] == "0/1"
    assert rows["db"]["reason"] == {"reason": "Unschedulable", "message": "0/1 nodes fit: 1 insufficient cpu"}
    _, by_label = await get(dash, "/api/v1/projects?label=tier%3Ddb")
    assert [p["name"] for p in by_label["projects"]] == ["db"]
    _, by_phase = await get(dash, "/api/v1/projects?phase=Scheduled")
    assert [p["name"] for p in by_phase["projects"]] == ["web"]
    status, bad = await get(dash, "/api/v1/projects?label=%3D%3D")
    assert status == 422 and bad["error"].startswith("label:")
    _, detail = await get(dash, "/api/v1/projects/db")
    assert detail["reason"]["reason"] == "Unschedulable"
    assert [c["type"] for c in detail["conditions"]] == ["Phase", "Scheduled"]


async def test_projectsets_list_and_page_with_their_replicas(dash: RunningDashboard, cluster: Client) -> None:
    s = v1.ProjectSet()
    s.metadata.name = "shop"
    s.spec.replicas = 2
    s.spec.selector.match_labels["app"] = "shop"
    s.spec.template.labels["app"] = "shop"
    s.spec.template.spec.services.add(name="main", image="busybox:test")
    stored = await cluster.projectsets.create(s)
    stored.status.replicas, stored.status.ready_replicas, stored.status.available_replicas = 2, 1, 1
    stored.status.updated_replicas, stored.status.update_revision = 2, "5c1f0a9e3b"
    stored.status.revisions.add(revision=1, hash="5c1f0a9e3b")
    meta.set_condition(stored.status.conditions, v1.CONDITION_PROGRESSING, v1.TRUE, reason="ReplicasUpdating",
                       message="revision 1: 2 of 2 updated, 1 available", now=SystemClock().now())  # fmt: skip
    stored = await cluster.projectsets.update_status(stored)
    replica = project("shop-5c1f0a9e3b-bcdfg", labels={"app": "shop", v1.TEMPLATE_HASH_LABEL: "5c1f0a9e3b"})
    meta.set_owner(replica, stored, controller=True)
    await cluster.projects.create(replica)

    body = await eventually(dash, "/api/v1/projectsets", lambda b: b["projectsets"] and b["projectsets"][0]["ready"])
    (row,) = body["projectsets"]
    assert (row["name"], row["desired"], row["ready"], row["updated"], row["available"]) == ("shop", 2, 1, 2, 1)
    assert row["revision"] == 1 and row["condition"]["reason"] == "ReplicasUpdating"
    page = await eventually(dash, "/api/v1/projectsets/shop", lambda b: b["projects"])
    assert [(p["name"], p["revision"]) for p in page["projects"]] == [("shop-5c1f0a9e3b-bcdfg", "5c1f0a9e3b")]
    assert page["strategy"]["type"] == "RollingUpdate" and page["disruptionBudget"] is None
    _, replica_page = await get(dash, "/api/v1/projects/shop-5c1f0a9e3b-bcdfg")
    assert replica_page["projectset"] == "shop"
    status, missing = await get(dash, "/api/v1/projectsets/nope")
    assert status == 404 and missing["error"] == 'projectsets "nope" not found in namespace "default"'


async def test_generic_kind_table_and_object(dash: RunningDashboard) -> None:
    _, kinds = await get(dash, "/api/v1/kinds")
    plurals = {k["plural"] for k in kinds["kinds"]}
    assert plurals >= {p for p, k in meta.KINDS.items() if not k.confidential} and "secrets" not in plurals
    body = await eventually(dash, "/api/v1/kinds/nodes", lambda b: b["rows"])
    assert body["kind"] == "Node" and [r["name"] for r in body["rows"]] == [NODE]
    _, obj = await get(dash, f"/api/v1/kinds/nodes/{NODE}")
    assert obj["metadata"]["labels"] == {"zone": "a"} and obj["status"]["allocatable"]["cpu"] == "4"
    status, missing = await get(dash, "/api/v1/kinds/widgets")
    assert status == 404 and "widgets" in missing["error"]


async def test_stream_pushes_a_phase_change_within_a_second(dash: RunningDashboard, cluster: Client) -> None:
    await eventually(dash, "/api/v1/projects", lambda b: len(b["projects"]) == 2)
    async with dash.session() as s, s.get(dash.url + "api/v1/stream") as stream:
        assert stream.headers["Content-Type"] == "text/event-stream"
        assert await stream.content.readline() == b"event: hello\n"
        live = await cluster.projects.get("web")
        meta.set_phase(live, v1.RUNNING, reason="Started", message="", now=SystemClock().now())
        started = asyncio.get_running_loop().time()
        await cluster.projects.update_status(live)
        change = await asyncio.wait_for(_next_change(stream), 1.0)
        assert asyncio.get_running_loop().time() - started < 1.0
    assert {"resource": "projects", "namespace": "default", "name": "web", "type": "MODIFIED"} in change["objects"]
    _, rows = await get(dash, "/api/v1/projects?phase=Running")
    assert [p["name"] for p in rows["projects"]] == ["web"]


async def _next_change(stream: aiohttp.ClientResponse) -> dict[str, Any]:
    event = ""
    while True:
        line = (await stream.content.readline()).decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: ") and event == "change":
            return json.loads(line[len("data: ") :])  # type: ignore[no-any-return]  # json.loads gives Any; the change event is an object


async def test_apply_delete_and_node_actions(dash: RunningDashboard, cluster: Client) -> None:
    manifest = (
        "apiVersion: caravanserai/v1\nkind: Project\nmetadata:\n  name: api\n"
        "spec:\n  services:\n  - name: a\n    image: busybox:test\n"
    )
    assert await send(dash, "POST", "/api/v1/apply", {"manifest": manifest}) == (
        200,
        {"applied": [{"object": "project/api", "action": "created"}]},
    )
    assert (await send(dash, "POST", "/api/v1/apply", {"manifest": manifest}))[1]["applied"][0]["action"] == "unchanged"
    status, refused = await send(
        dash, "POST", "/api/v1/apply", {"manifest": manifest.replace("name: api", "name: Bad_Name")}
    )
    assert status == 422 and "metadata.name" in refused["error"] and "\n" not in refused["error"]
    broken = manifest.replace("name: api", "name: api2") + "---\n" + manifest.replace("image:", "zzz: 1\n    image:")
    status, unread = await send(dash, "POST", "/api/v1/apply", {"manifest": broken})
    assert status == 422 and unread["error"].startswith("manifest, document 2") and "zzz" in unread["error"]
    assert "api2" not in [p.metadata.name for p in await cluster.projects.list()]  # nothing applied
    assert await send(dash, "DELETE", "/api/v1/projects/api") == (200, {"object": "project/api", "deleted": True})
    status, gone = await send(dash, "DELETE", "/api/v1/projects/api")
    assert status == 404 and gone["error"] == 'projects "api" not found in namespace "default"'
    assert (await send(dash, "POST", f"/api/v1/nodes/{NODE}/cordon"))[1]["changed"] is True
    assert (await cluster.nodes.get(NODE)).spec.unschedulable
    assert (await send(dash, "POST", f"/api/v1/nodes/{NODE}/uncordon"))[1]["changed"] is True
    _, drained = await send(dash, "POST", f"/api/v1/nodes/{NODE}/drain")
    assert drained["moved"] == ["web"]
    assert (await cluster.nodes.get(NODE)).spec.unschedulable
    moved = await cluster.projects.get("web")
    assert moved.status.phase == v1.PENDING
    assert meta.get_condition(moved.status.conditions, v1.CONDITION_PHASE).reason == "NodeDrained"  # type: ignore[union-attr]  # the drained project has its Phase condition
    status, unknown = await send(dash, "POST", "/api/v1/nodes/nowhere/cordon")
    assert status == 404 and unknown["error"] == 'nodes "nowhere" not found'


async def test_project_page_shows_volume_backups_and_drain_refuses_data_left_behind(
    dash: RunningDashboard, cluster: Client
) -> None:
    wiki = project("wiki")
    data = wiki.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    data.backup.repository, data.backup.every, data.backup.keep.last = "offsite", "5m", 3
    wiki.spec.volumes.add(name="files", type=v1.VOLUME_PERSISTENT)
    stored = await cluster.projects.create(wiki)
    stored.status.node_ref = NODE
    now = SystemClock().now()
    meta.set_phase(stored, v1.SCHEDULED, reason="Scheduled", message="", now=now)
    status = stored.status.volumes.add(name="data", message="first run: no snapshot yet")
    status.last_backup.id, status.last_backup.time.seconds = "4f1c2a9b" + "0" * 56, int(now - 120)
    await cluster.projects.update_status(stored)
    body = await eventually(dash, "/api/v1/projects/wiki", lambda b: b["volumes"] and b["volumes"][0]["lastBackupAge"])
    data_view, files_view = body["volumes"]
    assert (data_view["every"], data_view["everySeconds"], data_view["overdue"]) == ("5m", 300.0, False)
    assert 110 < data_view["lastBackupAge"] < 180 and data_view["lastSnapshot"] == "4f1c2a9b"
    assert data_view["message"] == "first run: no snapshot yet" and data_view["restoring"] is None
    assert (files_view["name"], files_view["backedUp"], files_view["lastBackupAge"]) == ("files", False, None)
    status_code, refused = await send(dash, "POST", f"/api/v1/nodes/{NODE}/drain")
    assert status_code == 409
    assert refused["error"] == (
        f"cannot drain node/{NODE}: project/wiki (volume files) would leave Persistent volume data behind on {NODE} "
        "(no backup configured); add a backup to those volumes, or drain with `caractrl drain NODE --force` to "
        "leave the data behind"
    )
    assert not (await cluster.nodes.get(NODE)).spec.unschedulable  # nothing written
    assert (await cluster.projects.get("web")).status.phase == v1.SCHEDULED


async def test_writes_need_json_and_the_dashboards_own_origin(dash: RunningDashboard) -> None:
    status, body = await send(dash, "POST", f"/api/v1/nodes/{NODE}/cordon", headers={"Origin": "http://evil.example"})
    assert status == 403 and "evil.example" in body["error"]
    async with dash.session() as s, s.post(dash.url + f"api/v1/nodes/{NODE}/cordon", data="x=1") as r:
        assert r.status == 415
        assert r.headers["Content-Security-Policy"].startswith("default-src 'self'")


async def test_read_only_refuses_every_action(api: RunningApiServer, cluster: Client) -> None:
    async with dashboard(api.address, "--read-only") as d:
        _, config = await get(d, "/api/v1/config")
        assert config["readOnly"] is True
        for method, path, body in (
            ("POST", "/api/v1/apply", {"manifest": "kind: Project"}),
            ("DELETE", "/api/v1/projects/web", None),
            ("POST", f"/api/v1/nodes/{NODE}/cordon", None),
            ("POST", f"/api/v1/nodes/{NODE}/drain", None),
        ):
            status, refused = await send(d, method, path, body)
            assert (status, refused) == (403, {"error": "the dashboard is read-only (started with --read-only)"})
    assert (await cluster.projects.get("web")).status.phase == v1.SCHEDULED
    assert not (await cluster.nodes.get(NODE)).spec.unschedulable


async def test_off_loopback_needs_https_or_allow_insecure(api: RunningApiServer) -> None:
    with pytest.raises(ValueError, match=r"refusing plain HTTP on 0.0.0.0:0"):
        async with dashboard(api.address, "--listen", "0.0.0.0:0"):
            pass
    async with dashboard(api.address, "--listen", "0.0.0.0:0", "--allow-insecure") as d:
        assert (await get(d, "/api/v1/config"))[0] == 200


async def test_the_process_lists_a_custom_kind_defined_later_with_its_printer_columns(
    api: RunningApiServer, cluster: Client, tmp_path: Path
) -> None:
    """cara-dashboard as its own process: it learns the kind from the server (nothing is registered in it)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caravanserai.dashboard",
        "--server",
        api.address,
        "--listen",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
        "--access-token-file",
        str(tmp_path / "token"),
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        token = await wait_for(lambda: _token_in(tmp_path / "token"), 10, message="the token file")
        await define_webfarm(cluster)
        await cluster.resource(webfarm_messages().WebFarm).create(webfarm("blue", replicas=3))
        kinds = await eventually(
            url,
            f"/api/v1/kinds?token={token}",
            lambda b: any(k["plural"] == "webfarms" for k in b["kinds"]),
            timeout=20,
        )
        (listed,) = [k for k in kinds["kinds"] if k["plural"] == "webfarms"]
        assert listed["kind"] == "WebFarm" and listed["columns"] == ["REPLICAS", "READY"]
        table = await eventually(url, f"/api/v1/kinds/webfarms?token={token}", lambda b: b["rows"])
        assert table["columns"] == ["REPLICAS", "READY"]
        assert [(r["name"], r["cells"]) for r in table["rows"]] == [("blue", [3, None])]
        _, obj = await get(url, f"/api/v1/kinds/webfarms/blue?token={token}")
        assert obj["spec"]["replicas"] == 3
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 15) == 0


def _token_in(path: Path) -> str | None:
    """The token the dashboard wrote to `path` (mode 0600), None until it has."""
    if not path.exists():
        return None
    assert path.stat().st_mode & 0o777 == 0o600
    return path.read_text().strip() or None


async def raw(d: RunningDashboard, method: str, path: str, **kwargs: Any) -> aiohttp.ClientResponse:
    """The answer (body read) to a request sent without the test's token, with `kwargs` as given."""
    async with aiohttp.ClientSession() as s, s.request(method, d.url + path.lstrip("/"), **kwargs) as r:
        await r.read()
        return r


async def test_a_dns_rebinding_page_can_neither_read_nor_write(dash: RunningDashboard, cluster: Client) -> None:
    """A page on rebind.evil.example whose name now resolves to 127.0.0.1: Host and Origin are its own name."""
    evil = f"rebind.evil.example:{dash.process.port}"
    rebound = {"Host": evil, "Origin": f"http://{evil}", **dash.headers}  # even with the token
    for method, path, body in (
        ("GET", "/", None),
        ("GET", "/api/v1/projects/web", None),
        ("GET", "/api/v1/projects/web/logs", None),
        ("GET", "/static/app.js", None),
        ("POST", f"/api/v1/nodes/{NODE}/cordon", {}),
        ("POST", "/api/v1/apply", {"manifest": "kind: Project"}),
    ):
        r = await raw(dash, method, path, json=body, headers=rebound)
        assert r.status == 403, (method, path, r.status)
        assert "rebind.evil.example" in (await r.json())["error"]
    assert not (await cluster.nodes.get(NODE)).spec.unschedulable
    for host in (f"localhost:{dash.process.port}", f"[::1]:{dash.process.port}", f"127.0.0.1:{dash.process.port}"):
        assert (await raw(dash, "GET", "/api/v1/config", headers={"Host": host, **dash.headers})).status == 200
    wrong_port = {"Host": f"localhost:{dash.process.port + 1}", **dash.headers}
    assert (await raw(dash, "GET", "/api/v1/config", headers=wrong_port)).status == 403


async def test_allowed_hosts_admit_a_tunnel_name(api: RunningApiServer, cluster: Client) -> None:
    async with dashboard(api.address, "--allowed-hosts", "dash.example.org,tunnel.example:8443") as d:
        for host, status in (
            ("dash.example.org", 200),
            ("dash.example.org:443", 200),
            ("tunnel.example:8443", 200),
            ("tunnel.example:8444", 403),
            ("evil.example.org", 403),
        ):
            assert (await raw(d, "GET", "/api/v1/config", headers={"Host": host, **d.headers})).status == status, host


async def test_no_token_no_entry_and_the_page_says_how_to_get_in(dash: RunningDashboard) -> None:
    for path in ("/", "/api/v1/cluster", "/api/v1/projectsets", "/api/v1/stream", "/static/app.js", "/healthz"):
        r = await raw(dash, "GET", path)
        assert r.status == 401, path
    page = await raw(dash, "GET", "/", headers={"Accept": "text/html,application/xhtml+xml"})
    assert page.status == 401 and page.content_type == "text/html"
    assert "?token=" in await page.text() and "cara up" in await page.text()
    r = await raw(dash, "GET", "/api/v1/cluster")
    assert "access token" in (await r.json())["error"]
    for wrong in ("Token nope", "Bearer nope", f"Basic {dash.token}"):
        assert (await raw(dash, "GET", "/api/v1/config", headers={"Authorization": wrong})).status == 401
    r = await raw(dash, "POST", f"/api/v1/nodes/{NODE}/cordon", json={})
    assert r.status == 401
    assert (await raw(dash, "GET", "/api/v1/config", headers={"Authorization": f"Bearer {dash.token}"})).status == 200


async def test_the_token_in_the_url_sets_a_strict_httponly_cookie(dash: RunningDashboard) -> None:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:  # unsafe: an IP address
        async with s.get(dash.login_url) as first:
            assert first.status == 200 and first.content_type == "text/html"
            cookie = first.cookies[f"cara-dashboard-{dash.process.port}"]
            assert cookie.value == dash.token
            assert cookie["httponly"] is True and cookie["samesite"] == "Strict" and cookie["path"] == "/"
        async with s.get(dash.url + "api/v1/config") as later:  # the cookie alone lets the page in
            assert later.status == 200
    async with aiohttp.ClientSession() as s, s.get(dash.url + "?token=wrong") as r:
        assert r.status == 401 and not r.cookies
