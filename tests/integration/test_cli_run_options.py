"""`caractrl apply` of the new service fields against a real apiserver: the schema's file mode form (0400) is
stored as octal, each bad field (and a memory request below Docker's minimum) is refused in one line naming its
path, and nothing is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai.client import Client
from caravanserai.errors import NotFound

EDGE = """\
apiVersion: caravanserai/v1
kind: Project
metadata: {name: edge}
spec:
  volumes:
  - {name: creds, type: Secret, secret: creds, mode: 0400}
  services:
  - name: web
    image: nginx:1.27
    user: "101:101"
    capAdd: [NET_BIND_SERVICE]
    tmpfs: [{mountPath: /run, size: 8Mi, mode: 01777}]
    stopSignal: SIGQUIT
    stopGracePeriod: 30s
    ulimits: [{name: nofile, soft: 1024, hard: 4096}]
    resources: {requests: {memory: 16Mi}}
    volumeMounts: [{name: creds, mountPath: /etc/creds}]
"""


async def test_the_fields_apply_and_a_file_mode_written_0400_is_octal(
    cli: Caractrl, client: Client, tmp_path: Path
) -> None:
    path = tmp_path / "edge.yaml"
    path.write_text(EDGE)
    result = await cli("apply", "-f", str(path))
    assert (result.exit_code, result.stdout) == (0, "project/edge created\n"), result.stderr
    stored = await client.projects.get("edge")
    assert stored.spec.volumes[0].mode == 0o400 and stored.spec.services[0].tmpfs[0].mode == 0o1777
    assert stored.spec.services[0].stop_grace_period == "30s"


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("memory: 16Mi", "memory: 4Mi", 'spec.services[0].resources.requests["memory"]: must be at least 6Mi'),
        ("capAdd: [NET_BIND_SERVICE]", "capAdd: [FLY]", "spec.services[0].capAdd[0]: must be a Linux capability"),
        ("stopSignal: SIGQUIT", "stopSignal: SIGFOO", "spec.services[0].stopSignal: must be a signal name"),
        ("soft: 1024", "soft: 8192", "spec.services[0].ulimits[0].soft: must not be above the hard limit"),
    ],
)
async def test_a_bad_field_is_refused_in_one_line_naming_its_path(
    cli: Caractrl, client: Client, tmp_path: Path, old: str, new: str, field: str
) -> None:
    path = tmp_path / "edge.yaml"
    path.write_text(EDGE.replace(old, new))
    result = await cli("apply", "-f", str(path))
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("Error from server (Invalid): ") and field in line, line
    with pytest.raises(NotFound):
        await client.projects.get("edge")
