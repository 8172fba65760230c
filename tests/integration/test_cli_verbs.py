"""caractrl label, annotate, patch and edit against a real etcd and apiserver."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai.client import Client
from caravanserai.testing import builders


async def test_label_adds_refuses_overwrite_overwrites_and_removes(cli: Caractrl, client: Client) -> None:
    await client.projects.create(builders.project("web", labels={"tier": "front"}))
    added = await cli("label", "project", "web", "team=core", "env=prod")
    assert (added.exit_code, added.stdout) == (0, "project/web labeled\n")
    assert dict((await client.projects.get("web")).metadata.labels) == {"tier": "front", "team": "core", "env": "prod"}

    refused = await cli("label", "project/web", "tier=back")
    assert refused.exit_code == 1
    assert refused.stderr == "error: 'tier' already has a value (front), and --overwrite is false\n"
    assert (await cli("label", "project/web", "tier=back", "--overwrite")).stdout == "project/web labeled\n"
    assert (await cli("label", "project", "web", "tier=back")).stdout == "project/web not labeled\n"

    removed = await cli("label", "project", "web", "env-", "team-")
    assert removed.stdout == "project/web labeled\n"
    assert dict((await client.projects.get("web")).metadata.labels) == {"tier": "back"}

    bad = await cli("label", "project", "web", "bad key=x")
    assert bad.exit_code == 1 and bad.stderr.startswith('Error from server (Invalid): project "web" is invalid: ')
    assert "metadata.labels" in bad.stderr and len(bad.stderr.splitlines()) == 1
    missing = await cli("label", "project", "nope", "a=b")
    assert (missing.exit_code, missing.stderr) == (1, 'Error from server (NotFound): projects "nope" not found\n')
    usage = await cli("label", "project", "web")
    assert usage.exit_code == 2 and "at least one label update is required" in usage.stderr


async def test_annotate_by_selector(cli: Caractrl, client: Client) -> None:
    for name in ("a", "b", "c"):
        await client.projects.create(builders.project(name, labels={"app": "web" if name != "c" else "db"}))
    result = await cli("annotate", "projects", "-l", "app=web", "example.com/owner=ops")
    assert result.stdout == "project/a annotated\nproject/b annotated\n"
    owners = {p.metadata.name: p.metadata.annotations.get("example.com/owner") for p in await client.projects.list()}
    assert owners == {"a": "ops", "b": "ops", "c": None}
    assert (await cli("annotate", "project", "a", "example.com/owner-")).stdout == "project/a annotated\n"
    assert "example.com/owner" not in (await client.projects.get("a")).metadata.annotations


async def test_patch_merges_removes_and_refuses_with_field_paths(cli: Caractrl, client: Client) -> None:
    await client.projects.create(builders.project("web", labels={"old": "x"}))
    result = await cli(
        "patch", "project", "web", "-p", '{"spec": {"priority": 7}, "metadata": {"labels": {"old": null, "new": "y"}}}'
    )
    assert (result.exit_code, result.stdout) == (0, "project/web patched\n")
    web = await client.projects.get("web")
    assert web.spec.priority == 7 and dict(web.metadata.labels) == {"new": "y"} and web.metadata.generation == 2
    assert len(web.spec.services) == 1  # untouched parts stay

    again = await cli("patch", "project/web", "-p", '{"spec": {"priority": 7}}')
    assert again.stdout == "project/web patched (no change)\n"
    unknown = await cli("patch", "project", "web", "-p", '{"spec": {"priorty": 1}}')
    assert unknown.exit_code == 1 and "spec.priorty: unknown field" in unknown.stderr
    status = await cli("patch", "project", "web", "-p", '{"status": {"phase": "Running"}}')
    assert status.exit_code == 1
    assert status.stderr == (
        'Error from server (Invalid): project "web" is invalid: status: is written by '
        "controllers and agents, not by this command\n"
    )
    invalid = await cli("patch", "project", "web", "-p", '{"spec": {"services": [{"name": "app"}]}}')
    assert invalid.exit_code == 1 and "spec.services[0].image" in invalid.stderr
    not_json = await cli("patch", "project", "web", "-p", "{spec")
    assert not_json.exit_code == 2 and "not valid JSON" in not_json.stderr
    assert (await client.projects.get("web")).spec.priority == 7


def editor(tmp_path: Path, old: str, new: str) -> str:
    """A non-interactive $EDITOR replacing `old` by `new` in the file it is given."""
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys, pathlib\n"
        "path = pathlib.Path(sys.argv[1])\n"
        f"path.write_text(path.read_text().replace({old!r}, {new!r}))\n"
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


async def test_edit_applies_on_save(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    await client.projects.create(builders.project("web"))
    cli.env["CARA_EDITOR"] = editor(tmp_path, "priority", "priority")  # a no-op: nothing to apply
    cancelled = await cli("edit", "project", "web")
    assert (cancelled.exit_code, cancelled.stdout) == (0, "Edit cancelled, no changes made.\n")

    cli.env["CARA_EDITOR"] = editor(tmp_path, "sleep", "watch")
    edited = await cli("edit", "project", "web")
    assert (edited.exit_code, edited.stdout) == (0, "project/web edited\n")
    assert list((await client.projects.get("web")).spec.services[0].command) == ["watch", "3600"]


async def test_edit_refusal_names_the_field_and_keeps_the_file(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    await client.projects.create(builders.project("web"))
    before = await client.projects.get("web")
    cli.env["CARA_EDITOR"] = editor(tmp_path, "image:", "imag:")
    result = await cli("edit", "project", "web")
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    assert 'spec.services[0].imag: unknown field (did you mean "image"?)' in result.stderr
    kept = Path(result.stderr.rsplit("(the edited file was kept: ", 1)[1].rstrip(")\n"))
    assert "imag: busybox:test" in kept.read_text()
    kept.unlink()

    cli.env["CARA_EDITOR"] = editor(tmp_path, "phase: Pending", "phase: Running")
    status = await cli("edit", "project", "web")
    assert status.exit_code == 1 and "status: is written by controllers and agents" in status.stderr
    Path(status.stderr.rsplit("(the edited file was kept: ", 1)[1].rstrip(")\n")).unlink()
    assert await client.projects.get("web") == before


async def test_describe_every_kind(cli: Caractrl, client: Client) -> None:
    import time

    from caravanserai import meta, v1
    from caravanserai.clock import timestamp

    lease = builders.lease("cara-gc")
    lease.spec.renew_time.CopyFrom(timestamp(time.time()))
    await client.leases.create(lease)
    event = meta.with_type_meta(v1.Event())
    event.metadata.name = "web.1"
    event.spec.involved_object.kind = "Project"
    event.spec.involved_object.name = "web"
    event.spec.type, event.spec.reason, event.spec.message = "Warning", "FailedScheduling", "0/1 nodes are available"
    event.spec.source.component = "cara-scheduler"
    event.spec.count = 3
    event.spec.last_timestamp.CopyFrom(timestamp(time.time()))
    await client.events.create(event)

    described = (await cli("describe", "lease", "cara-gc")).stdout
    fields = dict(line.split(":", 1) for line in described.splitlines() if ":" in line and not line.startswith(" "))
    assert fields["Kind"].strip() == "Lease" and fields["Holder"].strip() == "cara-gc"
    assert fields["State"].strip().startswith("held by cara-gc, expires in ")
    assert "Events:" in described

    about = (await cli("describe", "event/web.1")).stdout
    fields = dict(line.split(":", 1) for line in about.splitlines() if ":" in line and not line.startswith(" "))
    assert fields["Involved Object"].strip() == "project/web"
    assert (fields["Type"].strip(), fields["Reason"].strip(), fields["Count"].strip()) == (
        "Warning",
        "FailedScheduling",
        "3",
    )
    assert fields["Source"].strip() == "cara-scheduler"
    every = await cli("describe", "leases")
    assert every.exit_code == 0 and every.stdout.startswith("Name:")
