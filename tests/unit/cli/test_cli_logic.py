"""caractrl logic without a server: apply's merge, manifest splitting, config, error lines, watch relist, --for."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click
import pytest

from caravanserai import meta, v1
from caravanserai.backoff import Backoff
from caravanserai.cli.config import ConfigError, Settings, channel_credentials, load_config
from caravanserai.cli.errors import describe_error, invalid, not_found
from caravanserai.cli.resources import CONFLICT_RETRIES, modify, parse_target
from caravanserai.cli.wait import hopeless, parse_condition
from caravanserai.cli.watching import Selection, SelectionWatch
from caravanserai.client import Change, ObjectList
from caravanserai.client.apply import LAST_APPLIED, applied_form, configuration, merged, same
from caravanserai.errors import Conflict, Expired, FieldViolation, Invalid, Unavailable
from caravanserai.testing import builders
from caravanserai.text.manifestfiles import Source, load_source, split_documents

# ---- apply merge ----------------------------------------------------------------------------------------------


def applied(obj: Any) -> Any:
    """`obj` as stored after an apply of itself (carrying its last-applied annotation)."""
    out = meta.copy(obj)
    out.metadata.annotations[LAST_APPLIED] = configuration(applied_form(obj))
    return out


def test_reapplying_the_same_manifest_changes_nothing() -> None:
    declared = builders.project("web", labels={"app": "web"})
    live = applied(declared)
    live.metadata.resource_version = "7"
    assert same(merged(live, declared), live)


def test_labels_dropped_from_the_manifest_go_labels_of_others_stay() -> None:
    before = builders.project("web", labels={"app": "web", "tier": "front"})
    live = applied(before)
    live.metadata.labels["owner"] = "ops"
    now = builders.project("web", labels={"app": "web"})
    assert dict(merged(live, now).metadata.labels) == {"app": "web", "owner": "ops"}


def test_node_spec_fields_not_in_the_manifest_keep_their_live_value() -> None:
    live = builders.node("n1", unschedulable=True)  # registered by its agent, then cordoned
    declared = meta.with_type_meta(v1.Node())
    declared.metadata.name = "n1"
    declared.spec.taints.add(key="gpu", effect="NoSchedule")
    result = merged(live, declared)
    assert (result.spec.hostname, result.spec.unschedulable) == ("n1", True)
    assert [t.key for t in result.spec.taints] == ["gpu"]


def test_spec_fields_dropped_since_the_last_apply_are_cleared() -> None:
    first = builders.project("web", node_selector={"zone": "a"}, priority=5)
    second = builders.project("web")
    result = merged(applied(first), second)
    assert (dict(result.spec.node_selector), result.spec.priority) == ({}, 0)


def test_applied_form_drops_status_and_server_fields() -> None:
    obj = builders.project("web")
    obj.metadata.uid, obj.metadata.resource_version = "u", "3"
    obj.status.phase = v1.RUNNING
    form = applied_form(obj)
    assert (form.metadata.uid, form.metadata.resource_version, form.HasField("status")) == ("", "", False)


# ---- manifests --------------------------------------------------------------------------------------------------


def test_split_documents_follows_yaml_numbering() -> None:
    text = "# header\na: 1\n---\nb: 2\n...\n---\n---\nc: 3\n"
    assert split_documents(text) == [(1, "a: 1\n"), (2, "---\nb: 2\n"), (5, "---\n"), (6, "---\nc: 3\n")]


def test_load_source_numbers_documents_and_reports_each() -> None:
    good = "apiVersion: caravanserai/v1\nkind: Project\nmetadata: {name: a}\nspec: {services: [{name: a, image: x}]}\n"
    text = good + "---\n" + good.replace("image", "imag") + "---\n" + good.replace("name: a}", "name: b}")
    results = list(load_source(Source("f.yaml", text)))
    assert [getattr(r, "origin", None) for r in results] == [
        "f.yaml, document 1, line 1",
        None,
        "f.yaml, document 3, line 10",
    ]
    assert str(results[1]) == 'f.yaml, document 2, line 9: spec.services[0].imag: unknown field (did you mean "image"?)'


def test_load_source_keeps_line_numbers_of_syntax_errors() -> None:
    text = "apiVersion: caravanserai/v1\nkind: Node\nmetadata: {name: n1}\n---\nkind: Project\n  bad: : x\n"
    node, error = load_source(Source("f.yaml", text))
    assert getattr(node, "origin", None) == "f.yaml, document 1, line 1"
    assert str(error).startswith("f.yaml, document 2: line 6, column")


# ---- arguments ---------------------------------------------------------------------------------------------------


def test_parse_target_forms() -> None:
    assert parse_target("p", ["web", "db"])[1] == ["web", "db"]
    kind, names = parse_target("project/web", ["projects/db"])
    assert (kind.plural, names) == ("projects", ["web", "db"])
    with pytest.raises(click.UsageError):
        parse_target("project/web", ["node/n1"])
    with pytest.raises(click.UsageError):
        parse_target("leases", [], allowed=("projects",))


# ---- config -----------------------------------------------------------------------------------------------------


def test_config_file_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("server: cara:7420\ntoken: t0k\ntls: {ca: certs/ca.pem}\n")
    config = load_config(path)
    assert (config.server, config.token, config.tls_ca) == ("cara:7420", "t0k", tmp_path / "certs" / "ca.pem")


def test_missing_default_config_is_fine_but_an_explicit_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_config(None).server is None
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_server_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("server: from-file:1\n")
    monkeypatch.delenv("CARA_SERVER", raising=False)
    assert Settings(config_path=path).address() == "from-file:1"
    monkeypatch.setenv("CARA_SERVER", "from-env:2")
    assert Settings(config_path=path).address() == "from-env:2"
    assert Settings(server="from-flag:3", config_path=path).address() == "from-flag:3"


def test_tls_needs_cert_and_key_together(tmp_path: Path) -> None:
    assert channel_credentials(None, None, None) is None
    with pytest.raises(ConfigError, match="together"):
        channel_credentials(None, tmp_path / "c.pem", None)


# ---- error lines ------------------------------------------------------------------------------------------------


def test_error_lines() -> None:
    assert describe_error(not_found("projects", "web")) == 'Error from server (NotFound): projects "web" not found'
    assert describe_error(Unavailable("cannot reach the Caravanserai API server at h:1: refused")) == (
        "error: cannot reach the Caravanserai API server at h:1: refused"
    )
    assert describe_error(FileNotFoundError(2, "No such file or directory", "x.yaml")) == (
        "error: No such file or directory: x.yaml"
    )
    err = Invalid("bad", [FieldViolation("spec.services[0].image", "is required")])
    assert invalid("Project", "web", err) == 'project "web" is invalid: spec.services[0].image: is required'


# ---- wait conditions --------------------------------------------------------------------------------------------


def test_wait_conditions() -> None:
    projects, nodes = meta.KINDS["projects"], meta.KINDS["nodes"]
    project = builders.project("web")
    project.status.phase = v1.RUNNING
    meta.set_condition(project.status.conditions, v1.CONDITION_READY, v1.TRUE, now=0)
    assert parse_condition("phase=running", projects).test(project)
    assert parse_condition("condition=Ready", projects).test(project)
    assert not parse_condition("condition=Ready=false", projects).test(project)
    assert parse_condition("delete", projects).test(None)
    assert parse_condition("state=Ready", nodes).test(builders.node_status(builders.node("n1")))
    with pytest.raises(click.BadParameter):
        parse_condition("state=Ready", projects)


def test_a_failed_project_makes_waiting_for_running_hopeless() -> None:
    project = builders.project("web")
    meta.set_phase(project, v1.FAILED, reason="ContainerExited", message="exit 1", now=0)
    running = parse_condition("phase=Running", meta.KINDS["projects"])
    assert hopeless(project, [running]) == "project/web is Failed: ContainerExited: exit 1"
    assert hopeless(project, [parse_condition("phase=Failed", meta.KINDS["projects"])]) is None


# ---- watch resume -----------------------------------------------------------------------------------------------


class NeverDisconnected:
    """The `Client` behind `FakeResources`: its connection never drops, so a retry waits its full delay."""

    async def retry_pause(self, delay: float, *, clock: Any) -> bool:
        await clock.sleep(delay)
        return False


class FakeResources:
    """A ResourceClient stand-in: scripted lists and watch streams (an exception ends a stream with it)."""

    resource = "projects"
    client = NeverDisconnected()

    def __init__(self, lists: list[list[Any]], streams: list[list[Any]]) -> None:
        self.lists, self.streams = lists, streams
        self.watched_from: list[str] = []

    async def list(self, **_: Any) -> ObjectList[Any]:
        items = self.lists.pop(0)
        return ObjectList(items, str(100 + len(self.lists)))

    async def watch(self, *, resource_version: str, **_: Any) -> AsyncIterator[Change[Any]]:
        self.watched_from.append(resource_version)
        for step in self.streams.pop(0):
            if isinstance(step, Exception):
                raise step
            yield step


def project(name: str, version: str) -> v1.Project:
    obj = builders.project(name)
    obj.metadata.resource_version = version
    return obj


async def test_watcher_resumes_after_unavailable_and_relists_after_expired(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("caravanserai.cli.watching.BACKOFF", Backoff(initial=1e-6, cap=1e-6, jitter=0.0))
    fake = FakeResources(
        lists=[[project("a", "1"), project("b", "2")], [project("a", "9"), project("c", "8")]],
        streams=[
            [Change(v1.MODIFIED, project("a", "5")), Unavailable("gone")],
            [Change(v1.BOOKMARK, project("", "6")), Expired("compacted")],
            [Change(v1.ADDED, project("d", "10"))],
        ],
    )
    async with SelectionWatch(fake, Selection()) as watcher:  # type: ignore[arg-type]  # a fake of the typed resource client
        assert [o.metadata.name for o in await watcher.list_current()] == ["a", "b"]
        seen = []
        async for event in watcher.events():
            seen.append((event.type, event.object.metadata.name, event.object.metadata.resource_version))
            if event.object.metadata.name == "d":
                break
    assert seen == [
        ("MODIFIED", "a", "5"),
        ("MODIFIED", "a", "9"),
        ("ADDED", "c", "8"),
        ("DELETED", "b", "2"),  # synthesized by the relist
        ("ADDED", "d", "10"),
    ]
    assert fake.watched_from == ["101", "5", "100"]


def test_configuration_is_canonical() -> None:
    one = builders.project("web", labels={"a": "1", "b": "2"})
    two = builders.project("web", labels={"b": "2", "a": "1"})
    two.metadata.uid = "ignored"
    assert configuration(applied_form(one)) == configuration(applied_form(two))
    assert json.loads(configuration(applied_form(one)))["metadata"] == {"labels": {"a": "1", "b": "2"}, "name": "web"}


# ---- read-modify-write --------------------------------------------------------------------------------------------


class RacyNodes:
    """Node verbs where the first `conflicts` updates lose a race."""

    resource = "nodes"

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.reads = 0
        self.stored = builders.node("n1")

    async def get(self, name: str) -> v1.Node:
        self.reads += 1
        return meta.copy(self.stored)

    async def update(self, obj: v1.Node) -> v1.Node:
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("changed")
        self.stored = obj
        return obj


def cordon(node: v1.Node) -> bool:
    node.spec.unschedulable = True
    return True


async def test_modify_rereads_after_a_conflict() -> None:
    nodes = RacyNodes(conflicts=2)
    obj, changed = await modify(nodes, "n1", cordon)  # type: ignore[arg-type]  # RacyNodes fakes the nodes client
    assert (changed, obj.spec.unschedulable, nodes.reads) == (True, True, 3)


async def test_modify_gives_up_after_repeated_conflicts() -> None:
    nodes = RacyNodes(conflicts=CONFLICT_RETRIES)
    with pytest.raises(Conflict):
        await modify(nodes, "n1", cordon)  # type: ignore[arg-type]  # RacyNodes fakes the nodes client
    assert nodes.reads == CONFLICT_RETRIES
