"""The dashboard's pages as data: pure functions over objects (caravanserai.dashboard.views)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.dashboard import setviews, views
from caravanserai.dashboard.server import STATIC
from caravanserai.errors import Invalid
from caravanserai.testing.builders import lease, node, node_status, project

NOW = 1_800_000_000.0


def bound(name: str, node_name: str, phase: str = v1.RUNNING, **kwargs: object) -> v1.Project:
    p = project(name, **kwargs)  # type: ignore[arg-type]  # kwargs are builder fields, typed object here
    p.status.node_ref = node_name
    p.status.phase = phase
    p.metadata.creation_timestamp.CopyFrom(timestamp(NOW - 90))
    return p


def test_cluster_view_sums_requests_of_bound_projects_only() -> None:
    n = node_status(node("n1"), cpu="4", memory="8Gi")
    held = lease("n1")
    held.spec.renew_time.CopyFrom(timestamp(NOW - 3))
    projects = [
        bound("a", "n1", requests={"cpu": "500m", "memory": "1Gi"}),
        bound("b", "n1", v1.SCHEDULED, requests={"cpu": "1"}),
        bound("gone", "n1", v1.TERMINATED, requests={"cpu": "2"}),  # no longer occupies the node
        project("waiting"),
    ]
    view = views.cluster_view([n], [held], projects, NOW)
    (row,) = view["nodes"]
    assert row["leaseAge"] == pytest.approx(3.0)
    assert row["projects"] == ["a", "b"]
    assert {r["name"]: (r["allocatable"], r["requested"]) for r in row["resources"]} == {
        "cpu": (4.0, 1.5),
        "memory": (8 * 1024**3, 1024**3),
    }
    assert view["phases"] == {"Running": 1, "Scheduled": 1, "Terminated": 1, "Unknown": 1}


def test_pending_reason_prefers_the_unschedulable_verdict() -> None:
    p = project("p")
    p.status.phase = v1.PENDING
    meta.set_phase(p, v1.PENDING, reason="Created", message="", now=NOW)
    assert views.pending_reason(p) == {"reason": "Created", "message": ""}
    meta.set_condition(
        p.status.conditions, v1.CONDITION_SCHEDULED, v1.FALSE, reason="Unschedulable", message="0/3 nodes fit", now=NOW
    )
    assert views.pending_reason(p) == {"reason": "Unschedulable", "message": "0/3 nodes fit"}


def test_projects_view_filters_by_label_and_phase() -> None:
    projects = [bound("a", "n1", labels={"app": "web"}), bound("b", "n1", v1.FAILED, labels={"app": "db"})]
    assert [r["name"] for r in views.projects_view(projects, NOW, label="app=web")["projects"]] == ["a"]
    assert [r["name"] for r in views.projects_view(projects, NOW, phase="Failed")["projects"]] == ["b"]
    assert views.projects_view(projects, NOW)["projects"][0]["age"] == pytest.approx(90)
    with pytest.raises(Invalid):
        views.projects_view(projects, NOW, label="==")


def test_events_view_newest_first_and_filtered() -> None:
    def event(name: str, type_: str, kind: str, obj: str, at: float) -> v1.Event:
        e = v1.Event()
        e.metadata.name = name
        e.spec.type, e.spec.reason = type_, "R"
        e.spec.involved_object.kind, e.spec.involved_object.name = kind, obj
        e.spec.last_timestamp.CopyFrom(timestamp(at))
        return e

    events = [event("e1", "Normal", "Project", "web", NOW - 10), event("e2", "Warning", "Node", "n1", NOW - 5)]
    assert [r["name"] for r in views.events_view(events, NOW)["events"]] == ["e2", "e1"]
    assert [r["name"] for r in views.events_view(events, NOW, type_="Normal")["events"]] == ["e1"]
    assert [r["name"] for r in views.events_view(events, NOW, obj="Node/n1")["events"]] == ["e2"]


def test_project_view_lists_urls_of_ingress_and_host_ports() -> None:
    p = bound("web", "n1")
    p.spec.services[0].ports.add(container_port=80, host_port=18080)
    p.spec.ingress.add(name="site", host="web.example")
    p.spec.ingress.add(name="api")
    n = node("n1")
    n.status.network.addresses.add(type="InternalIP", address="10.0.0.5")
    n.status.network.ingress_port = 8081
    view = views.project_view(p, n, [], NOW)
    assert view["urls"] == ["http://web.example:8081/", "http://api.web.local:8081/", "http://10.0.0.5:18080/"]
    assert view["services"][0]["name"] == "svc0" and view["services"][0]["state"] == ""


def test_project_view_shows_each_volumes_last_backup_age_against_every() -> None:
    p = bound("wiki", "n1")
    data = p.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    data.backup.repository, data.backup.every = "offsite", "5m"
    p.spec.volumes.add(name="files", type=v1.VOLUME_PERSISTENT)
    p.spec.volumes.add(name="tmp")
    status = p.status.volumes.add(name="data", last_error="Fatal: unable to open repository")
    status.last_backup.id, status.last_backup.time.seconds = "4f1c2a9b" + "0" * 56, int(NOW - 900)
    status.restoring.snapshot.id, status.restoring.bytes_done, status.restoring.bytes_total = "9ab01c3d00", 512, 1024
    meta.set_condition(p.status.conditions, v1.CONDITION_BACKUP_OVERDUE, v1.TRUE, reason="Late", message="", now=NOW)
    volumes = views.project_view(p, None, [], NOW)["volumes"]
    assert [v["name"] for v in volumes] == ["data", "files"]  # tmp is Ephemeral: no data to tell about
    assert volumes[0] == {
        "name": "data",
        "type": "Persistent",
        "backedUp": True,
        "repository": "offsite",
        "every": "5m",
        "everySeconds": 300.0,
        "lastBackupAge": 900.0,
        "lastSnapshot": "4f1c2a9b",
        "overdue": True,
        "restoring": {
            "snapshot": "9ab01c3d",
            "bytesDone": 512,
            "bytesTotal": 1024,
            "text": "restoring 9ab01c3d: 512B / 1KiB",
        },
        "lastError": "Fatal: unable to open repository",
        "message": "",
        "summary": "last backup 15m ago (every 5m) OVERDUE",
    }
    assert volumes[1]["backedUp"] is False and volumes[1]["lastBackupAge"] is None and volumes[1]["summary"] == ""


@dataclass(frozen=True)
class Column:
    name: str
    json_path: str


@dataclass(frozen=True)
class CustomKind:
    """Stands in for a kind-table row that offers printer columns (as ResourceDefinitions do)."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    printer_columns: tuple[Column, ...]


def test_any_kind_table_uses_the_kinds_printer_columns() -> None:
    kind = CustomKind(
        "Node", "nodes", (), (Column("Zone", ".metadata.labels.zone"), Column("CPU", ".status.allocatable.cpu"))
    )
    n = node_status(node("n1", labels={"zone": "a"}))
    table = views.kind_table(kind, [n], NOW)  # type: ignore[arg-type]  # a CustomKind stands in for meta.Kind: the view reads its names and columns
    assert table["columns"] == ["Zone", "CPU"]
    assert table["rows"][0]["cells"] == ["a", "4"]
    assert views.kind_table(meta.KINDS["nodes"], [n], NOW)["columns"] == []


def test_json_path() -> None:
    data = {"spec": {"services": [{"name": "a"}]}, "status": {"readyReplicas": 2}}
    assert views.json_path(data, ".status.readyReplicas") == 2
    assert views.json_path(data, "$.spec.services[0].name") == "a"
    assert views.json_path(data, ".spec.services[3].name") is None
    assert views.json_path(data, ".nothing.here") is None


def test_page_files_are_package_data() -> None:
    """The page is served from the installed package: its files must be listed as package data."""
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    assert "static/*" in pyproject["tool"]["setuptools"]["package-data"]["caravanserai.dashboard"]
    assert {p.name for p in STATIC.iterdir()} >= {"index.html", "app.js", "style.css"}


def test_cluster_view_shows_node_groups_and_their_decisions() -> None:
    group = meta.with_type_meta(v1.NodeGroup())
    group.metadata.name = "gpu"
    group.spec.max_size = 3
    group.status.desired, group.status.current = 2, 1
    group.status.provisioning.add(name="gpu-x1")
    group.status.last_scale_up.CopyFrom(
        v1.ScalingDecision(
            time=timestamp(100.0), from_size=1, to_size=2, reason="1 Pending project(s) fit on 1 new node(s): a"
        )
    )
    view = views.cluster_view([], [], [], 160.0, groups=[group])
    (shown,) = view["groups"]
    assert shown["desired"] == 2 and shown["current"] == 1 and shown["provisioning"] == ["gpu-x1"]
    assert shown["lastScaleUp"] == {
        "from": 1,
        "to": 2,
        "reason": "1 Pending project(s) fit on 1 new node(s): a",
        "age": 60.0,
    }
    assert shown["lastScaleDown"] is None


def test_projectsets_list_their_counts_revision_and_a_failed_rollout() -> None:
    s = meta.with_type_meta(v1.ProjectSet())
    s.metadata.name, s.metadata.uid = "web", "uid-web"
    s.metadata.creation_timestamp.CopyFrom(timestamp(NOW - 60))
    s.spec.replicas = 4
    s.spec.strategy.rolling_update.max_surge, s.spec.strategy.rolling_update.max_unavailable = "2", "0"
    s.spec.disruption_budget.max_unavailable = "1"
    status = s.status
    status.replicas, status.ready_replicas, status.updated_replicas, status.available_replicas = 6, 4, 2, 4
    status.current_revision, status.update_revision, status.disruptions_allowed = "aaaa", "bbbb", 0
    status.revisions.add(revision=1, hash="aaaa", created=timestamp(NOW - 60))
    status.revisions.add(revision=2, hash="bbbb", created=timestamp(NOW - 10))
    why = "revision 2 made no progress for 3s"
    meta.set_condition(status.conditions, v1.CONDITION_PROGRESSING, v1.FALSE, reason="ProgressDeadlineExceeded",
                       message=why, now=NOW)  # fmt: skip
    (row,) = setviews.projectsets_view([s], NOW)["projectsets"]
    assert {k: row[k] for k in ("name", "desired", "ready", "updated", "available", "revision", "updateRevision")} == {
        "name": "web",
        "desired": 4,
        "ready": 4,
        "updated": 2,
        "available": 4,
        "revision": 2,
        "updateRevision": "bbbb",
    }
    assert row["condition"] == {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": why,
    }
    assert row["age"] == pytest.approx(60)

    def replica(name: str, revision: str, uid: str = "uid-web") -> v1.Project:
        p = bound(name, "n1", labels={v1.TEMPLATE_HASH_LABEL: revision})
        p.metadata.owner_references.add(api_version=v1.API_VERSION, kind="ProjectSet", name="web", uid=uid,
                                        controller=True)  # fmt: skip
        return p

    projects = [replica("web-bbbb-x", "bbbb"), replica("web-aaaa-y", "aaaa"), replica("stale", "aaaa", uid="gone")]
    projects.append(bound("alone", "n1"))
    event = v1.Event()
    event.spec.type, event.spec.reason, event.spec.message = "Warning", "ProgressDeadlineExceeded", why
    event.spec.involved_object.kind, event.spec.involved_object.name = "ProjectSet", "web"
    page = setviews.projectset_view(s, projects, [event], NOW)
    assert [(p["name"], p["revision"], p["projectset"]) for p in page["projects"]] == [
        ("web-aaaa-y", "aaaa", "web"),
        ("web-bbbb-x", "bbbb", "web"),
    ]  # by owner uid: a replica of an older set of the same name is not one of them
    assert page["strategy"] == {"type": "RollingUpdate", "maxSurge": "2", "maxUnavailable": "0", "surge": 2,
                                "unavailable": 0}  # fmt: skip
    assert page["disruptionBudget"] == {"minAvailable": "", "maxUnavailable": "1", "disruptionsAllowed": 0}
    assert [(r["revision"], r["roles"]) for r in page["revisions"]] == [(1, ["current"]), (2, ["update"])]
    assert [c["reason"] for c in page["conditions"]] == ["ProgressDeadlineExceeded"]
    assert [e["object"] for e in page["events"]] == ["projectset/web"]
    assert views.project_view(projects[-1], None, [], NOW)["projectset"] == ""
