"""BackupRepositories and volume backups through a real etcd and apiserver: `caractrl apply -f`, `get`, `describe`
and `delete` of the kind, and bad input refused with one line naming the field (caractrl) or one violation per
field (the client)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import Invalid
from caravanserai.testing import builders

MANIFESTS = """\
apiVersion: caravanserai/v1
kind: Secret
metadata: {name: restic-offsite}
spec:
  data: {RESTIC_PASSWORD: c2VjcmV0}
---
apiVersion: caravanserai/v1
kind: BackupRepository
metadata: {name: offsite, labels: {tier: backups}}
spec:
  url: rest:http://127.0.0.1:8000/wiki
  secret: restic-offsite
  initialize: true
---
apiVersion: caravanserai/v1
kind: Project
metadata: {name: wiki}
spec:
  services:
  - name: web
    image: busybox:test
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    type: Persistent
    restore: Never
    backup:
      repository: offsite
      every: 5m
      keep: {last: 3, daily: 7}
      before: {service: web, command: [sync], timeout: 30s}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


async def test_apply_get_describe_and_delete(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    path = write(tmp_path, "wiki.yaml", MANIFESTS)
    applied = await cli("apply", "-f", path)
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines() == [
        "secret/restic-offsite created",
        "backuprepository/offsite created",
        "project/wiki created",
    ]
    stored = await client.backuprepositories.get("offsite")
    assert (stored.spec.url, stored.spec.secret, stored.spec.initialize) == (
        "rest:http://127.0.0.1:8000/wiki",
        "restic-offsite",
        True,
    )
    volume = (await client.projects.get("wiki")).spec.volumes[0]
    assert (volume.backup.repository, volume.backup.every, volume.backup.keep.daily) == ("offsite", "5m", 7)
    assert volume.restore == v1.RESTORE_NEVER
    again = await cli("apply", "-f", path)
    assert again.stdout.splitlines()[1] == "backuprepository/offsite unchanged"

    table = await cli("get", "backuprepositories")
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "URL", "SECRET", "INITIALIZE", "AGE"]
    assert row.split()[:4] == ["offsite", "rest:http://127.0.0.1:8000/wiki", "restic-offsite", "true"]
    for name in ("brepo", "backuprepo", "backuprepository"):
        short = await cli("get", name, "offsite", "-o", "name")
        assert short.stdout == "backuprepository/offsite\n"
    as_json = json.loads((await cli("get", "brepo", "offsite", "-o", "json")).stdout)
    assert as_json["kind"] == "BackupRepository" and as_json["spec"]["secret"] == "restic-offsite"

    described = await cli("describe", "backuprepository", "offsite")
    assert described.exit_code == 0, described.output
    text = described.stdout
    assert "rest:http://127.0.0.1:8000/wiki" in text and "restic-offsite" in text and "tier=backups" in text
    used_by = text.split("Used By:")[1].split("Events:")[0]
    assert used_by.split() == ["PROJECT", "VOLUMES", "EVERY", "NODE", "wiki", "data", "5m", "<none>"]
    assert "c2VjcmV0" not in text  # the Secret is named, never read

    schema = json.loads((await cli("schema", "backuprepository", server=False)).stdout)
    spec = schema["$defs"]["BackupRepositorySpec"]
    assert spec["required"] == ["url", "secret"] and "restic" in spec["properties"]["url"]["description"]

    deleted = await cli("delete", "backuprepository", "offsite")
    assert (deleted.exit_code, deleted.stdout) == (0, "backuprepository/offsite deleted\n")
    assert (await cli("get", "brepo")).stderr == "No resources found in default namespace.\n"


BAD = [  # the line named is the bad field's (the file starts with apiVersion on line 1)
    (
        "kind: BackupRepository\nmetadata: {name: bad}\nspec: {url: 'http://host/x', secret: pw}\n",
        'bad.yaml, document 1, line 4: backuprepository "bad" is invalid: spec.url: must be a restic repository',
    ),
    (
        "kind: BackupRepository\nmetadata: {name: bad}\nspec: {url: /srv/b}\n",
        'bad.yaml, document 1, line 4: backuprepository "bad" is invalid: spec.secret: is required',
    ),
    (
        "kind: Project\nmetadata: {name: bad}\nspec:\n  services: [{name: web, image: busybox:test}]\n"
        "  volumes: [{name: tmp, backup: {repository: offsite, every: 5m, keep: {last: 1}}}]\n",
        'bad.yaml, document 1, line 6: project "bad" is invalid: spec.volumes[0].backup: '
        "backups are only for Persistent volumes",
    ),
    (
        "kind: Project\nmetadata: {name: bad}\nspec:\n  services: [{name: web, image: busybox:test}]\n"
        "  volumes: [{name: data, type: Persistent, backup: {repository: offsite, every: 5s, keep: {last: 1}}}]\n",
        'spec.volumes[0].backup.every: must be at least 10s, not "5s"',
    ),
    (
        "kind: Project\nmetadata: {name: bad}\nspec:\n  services: [{name: web, image: busybox:test}]\n"
        "  volumes: [{name: data, type: Persistent, backup: {repository: offsite, every: 1m, keep: {last: 1},"
        " before: {service: web, command: [sync]}}}]\n",
        'spec.volumes[0].backup.before.service: service "web" does not mount volume "data"',
    ),
    (
        "kind: Project\nmetadata: {name: bad}\nspec:\n  services: [{name: web, image: busybox:test}]\n"
        "  volumes: [{name: data, type: Persistent, restoreRequest: {snapshot: XYZ}}]\n",
        "spec.volumes[0].restoreRequest: needs a backup on the volume",
    ),
]


@pytest.mark.parametrize(("body", "message"), BAD)
async def test_bad_input_is_one_line_naming_the_field(cli: Caractrl, tmp_path: Path, body: str, message: str) -> None:
    result = await cli("apply", "-f", write(tmp_path, "bad.yaml", "apiVersion: caravanserai/v1\n" + body))
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("Error from server (Invalid): ") and message in result.stderr, result.stderr
    assert result.stdout == ""


async def test_the_client_gets_every_violation_with_its_field(client: Client) -> None:
    project = builders.project("wiki")
    data = project.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT, restore="Sometimes")
    data.backup.every = "often"
    data.backup.keep.last = -1
    data.restore_request.snapshot = "not-hex"
    scratch = project.spec.volumes.add(name="scratch", restore=v1.RESTORE_NEVER)
    scratch.backup.repository = "offsite"
    with pytest.raises(Invalid) as info:
        await client.projects.create(project)
    assert [v.field for v in info.value.violations] == [
        "spec.volumes[0].backup.repository",
        "spec.volumes[0].backup.every",
        "spec.volumes[0].backup.keep.last",
        "spec.volumes[0].backup.keep",
        "spec.volumes[0].restore",
        "spec.volumes[0].restoreRequest.snapshot",
        "spec.volumes[0].restoreRequest.requestedAt",
        "spec.volumes[1].backup",
        "spec.volumes[1].restore",
    ]
    repository = v1.BackupRepository(metadata=v1.ObjectMeta(name="r"))
    repository.spec.url = "rest:https://user:hunter2@backups.example.com/"
    repository.spec.secret = "restic"
    with pytest.raises(Invalid, match=r"spec.url: must not carry a password") as refused:
        await client.backuprepositories.create(repository)
    assert "hunter2" not in str(refused.value)  # the refusal does not echo the password
