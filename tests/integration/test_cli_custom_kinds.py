"""caractrl on custom kinds: get (printer columns, formats, selectors), describe, delete, resourcedefinitions."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai.client import Client
from caravanserai.testing.apiserver import RunningApiServer
from support.customkinds import define_webfarm, example_proto, webfarm, webfarm_messages


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


async def test_get_custom_kind_by_every_name_with_printer_columns(cli: Caractrl, client: Client) -> None:
    await define_webfarm(client)
    sets = client.resource(webfarm_messages().WebFarm)
    created = await sets.create(webfarm("web", replicas=3, labels={"tier": "front"}))
    created.status.ready_replicas = 2
    await sets.update_status(created)
    await sets.create(webfarm("db", replicas=1))
    for name in ("webfarms", "webfarm", "wf", "WebFarm"):
        result = await cli("get", name)
        assert result.exit_code == 0, result.stderr
        table = lines(result.stdout)
        assert table[0].split() == ["NAME", "REPLICAS", "READY", "AGE"]
        assert [row.split()[:3] for row in table[1:]] == [["db", "1", "<none>"], ["web", "3", "2"]]
    wide = await cli("get", "wf", "-o", "wide", "-l", "tier=front")
    assert lines(wide.stdout)[0].split() == ["NAME", "REPLICAS", "READY", "AGE", "LABELS"]
    assert lines(wide.stdout)[1].split()[0] == "web" and len(lines(wide.stdout)) == 2
    as_json = json.loads((await cli("get", "wf", "web", "-o", "json")).stdout)
    assert (as_json["apiVersion"], as_json["kind"], as_json["spec"]["replicas"]) == ("example.com/v1", "WebFarm", 3)
    assert "readyReplicas: 2" in (await cli("get", "webfarm/web", "-o", "yaml")).stdout
    assert lines((await cli("get", "wf", "-o", "name")).stdout) == ["webfarm/db", "webfarm/web"]


async def test_get_resourcedefinitions_and_delete_of_a_custom_object(cli: Caractrl, client: Client) -> None:
    await define_webfarm(client)
    await client.resource(webfarm_messages().WebFarm).create(webfarm("gone"))
    listed = await cli("get", "resourcedefinitions")
    assert lines(listed.stdout)[0].split() == ["NAME", "KIND", "SHORTNAMES", "AGE"]
    assert lines(listed.stdout)[1].split()[:3] == ["webfarms.example.com", "WebFarm", "wf"]
    assert lines((await cli("get", "rd", "-o", "name")).stdout) == ["resourcedefinition/webfarms.example.com"]
    deleted = await cli("delete", "wf", "gone")
    assert deleted.exit_code == 0, deleted.stderr
    assert (await cli("get", "wf")).stderr == "No resources found.\n"  # a cluster-wide kind


async def test_describe_a_custom_object(cli: Caractrl, client: Client) -> None:
    await define_webfarm(client)
    await client.resource(webfarm_messages().WebFarm).create(webfarm("web", replicas=3))
    result = await cli("describe", "wf", "web")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert lines(text)[0].split() == ["Name:", "web"] and lines(text)[1].split() == ["Kind:", "WebFarm"]
    assert "replicas: 3" in text


async def test_define_from_a_proto_then_apply_get_wait_schema(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    proto = str(example_proto())
    manifest = await cli(
        "define",
        "--proto",
        proto,
        "--kind",
        "WebFarm",
        "--group",
        "example.com",
        "--short-name",
        "wf",
        "--column",
        "REPLICAS=.spec.replicas",
        "-o",
        "yaml",
    )
    assert manifest.exit_code == 0, manifest.stderr
    assert manifest.stdout.startswith("apiVersion: caravanserai/v1\nkind: ResourceDefinition\n")
    assert "name: webfarms.example.com" in manifest.stdout and "schema: " in manifest.stdout
    applied = await cli("apply", "-f", "-", input=manifest.stdout)  # the base64 schema travels in the manifest
    assert (applied.exit_code, applied.stdout) == (0, "resourcedefinition/webfarms.example.com created\n"), (
        applied.stderr
    )
    again = await cli(
        "define",
        "--proto",
        proto,
        "--kind",
        "WebFarm",
        "--group",
        "example.com",
        "--short-name",
        "wf",
        "--column",
        "REPLICAS=.spec.replicas",
    )
    assert (again.exit_code, again.stdout) == (0, "resourcedefinition/webfarms.example.com unchanged\n")

    created = await cli("apply", "-f", "-", input=SET)
    assert (created.exit_code, created.stdout) == (0, "webfarm/web created\n"), created.stderr
    unchanged = await cli("apply", "-f", "-", input=SET)
    assert unchanged.stdout == "webfarm/web unchanged\n"
    bad = await cli("apply", "-f", "-", input=SET.replace("replicas: 2", "replicas: two"))
    assert bad.exit_code == 1 and "spec.replicas" in bad.stderr, bad.stderr
    table = lines((await cli("get", "wf")).stdout)
    assert table[0].split() == ["NAME", "REPLICAS", "AGE"] and table[1].split()[:2] == ["web", "2"]

    sets = client.resource("webfarms")
    obj = await sets.get("web")
    ready = obj.status.conditions.add()
    ready.type, ready.status = "Ready", "True"
    await sets.update_status(obj)
    waited = await cli("wait", "wf", "web", "--for", "condition=Ready", "--timeout", "10s")
    assert waited.exit_code == 0, waited.stderr

    schema = json.loads((await cli("schema", "wf")).stdout)
    top = schema["$defs"]["WebFarm"]["properties"]
    assert top["apiVersion"]["const"] == "example.com/v1" and "replicas" in json.dumps(schema["$defs"])


async def test_define_without_grpcio_tools_names_the_extra(cli: Caractrl, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grpc_tools", None)  # as if not installed
    result = await cli("define", "--proto", str(example_proto()), "--kind", "WebFarm", "--group", "example.com")
    assert result.exit_code == 1
    assert result.stderr == "error: compiling .proto files needs grpcio-tools: pip install 'caravanserai[proto]'\n"


SET = """\
apiVersion: example.com/v1
kind: WebFarm
metadata:
  name: web
spec:
  replicas: 2
  selector: {set: web}
  template:
    spec:
      services:
      - name: main
        image: busybox
"""


async def test_get_watch_on_a_custom_kind(api: RunningApiServer, client: Client) -> None:
    await define_webfarm(client)
    sets = client.resource(webfarm_messages().WebFarm)
    await sets.create(webfarm("first", replicas=2))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caravanserai.cli",
        "--server",
        api.address,
        "get",
        "wf",
        "-w",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        seen = await _read_until(proc.stdout, "first")
        assert seen[0].split() == ["NAME", "REPLICAS", "READY", "AGE"]
        await sets.create(webfarm("second", replicas=5))
        assert (await _read_until(proc.stdout, "second"))[-1].split()[:2] == ["second", "5"]
    finally:
        proc.kill()
        await proc.wait()


async def _read_until(stream: asyncio.StreamReader, word: str) -> list[str]:
    got: list[str] = []
    async with asyncio.timeout(20):
        while True:
            line = (await stream.readline()).decode()
            assert line, "caractrl get -w ended"
            got.append(line)
            if word in line:
                return got
