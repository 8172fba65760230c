"""Finalizers end to end against a real etcd and apiserver: apply carries `metadata.finalizers`, a deleted Pending
project with a finalizer stays Pending (never scheduled) until the finalizer is removed, and caractrl says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import FailedPrecondition, NotFound

MANIFEST = """\
apiVersion: caravanserai/v1
kind: Project
metadata:
  name: keep
  finalizers: [{finalizers}]
spec:
  services:
  - name: app
    image: busybox:test
"""


def manifest(tmp_path: Path, *finalizers: str) -> str:
    path = tmp_path / "keep.yaml"
    path.write_text(MANIFEST.format(finalizers=", ".join(finalizers)))
    return str(path)


async def test_apply_carries_finalizers_and_merges_them(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    created = await cli("apply", "-f", manifest(tmp_path, "example.com/backup"))
    assert created.stdout == "project/keep created\n"
    assert list((await client.projects.get("keep")).metadata.finalizers) == ["example.com/backup"]
    assert (await cli("apply", "-f", manifest(tmp_path, "example.com/backup"))).stdout == "project/keep unchanged\n"

    live = await client.projects.get("keep")  # a controller adds one of its own
    live.metadata.finalizers.append("example.com/audit")
    await client.projects.update(live)
    configured = await cli("apply", "-f", manifest(tmp_path, "example.com/backup", "example.com/other"))
    assert configured.stdout == "project/keep configured\n"
    assert list((await client.projects.get("keep")).metadata.finalizers) == [
        "example.com/backup",
        "example.com/audit",
        "example.com/other",
    ]
    await cli("apply", "-f", manifest(tmp_path))  # drops the ones apply added; the controller's stays
    assert list((await client.projects.get("keep")).metadata.finalizers) == ["example.com/audit"]


async def test_deleted_pending_project_with_finalizer_stays_pending(
    cli: Caractrl, client: Client, tmp_path: Path
) -> None:
    await cli("apply", "-f", manifest(tmp_path, "example.com/backup"))
    deleted = await cli("delete", "project", "keep")
    assert deleted.stdout == (
        "project/keep marked for deletion (stays Pending until its finalizers are removed: example.com/backup)\n"
    )
    marked = await client.projects.get("keep")
    assert marked.status.phase == v1.PENDING and marked.metadata.HasField("deletion_timestamp")
    described = (await cli("describe", "project", "keep")).stdout
    assert (
        "Deletion:             requested; the project stays Pending and is not scheduled until its finalizers "
        "are removed (example.com/backup), then its record is removed\n"
    ) in described
    assert "Terminating" not in described

    marked.status.phase = v1.SCHEDULED  # what a scheduler would do: refused
    marked.status.node_ref = "n1"
    with pytest.raises(FailedPrecondition, match="is being deleted"):
        await client.projects.update_status(marked)

    await cli("apply", "-f", manifest(tmp_path))  # the last finalizer goes: so does the project
    with pytest.raises(NotFound):
        await client.projects.get("keep")
