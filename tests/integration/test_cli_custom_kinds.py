"""caractrl on custom kinds: get (printer columns, formats, selectors), describe, delete, resourcedefinitions."""

from __future__ import annotations

import json

from caravanserai.client import Client
from caravanserai.testing.customkinds import define_projectset, projectset, projectset_messages

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


async def test_get_custom_kind_by_every_name_with_printer_columns(cli: Caractrl, client: Client) -> None:
    await define_projectset(client)
    sets = client.resource(projectset_messages().ProjectSet)
    created = await sets.create(projectset("web", replicas=3, labels={"tier": "front"}))
    created.status.ready_replicas = 2
    await sets.update_status(created)
    await sets.create(projectset("db", replicas=1))
    for name in ("projectsets", "projectset", "ps", "ProjectSet"):
        result = await cli("get", name)
        assert result.exit_code == 0, result.stderr
        table = lines(result.stdout)
        assert table[0].split() == ["NAME", "REPLICAS", "READY", "AGE"]
        assert [row.split()[:3] for row in table[1:]] == [["db", "1", "<none>"], ["web", "3", "2"]]
    wide = await cli("get", "ps", "-o", "wide", "-l", "tier=front")
    assert lines(wide.stdout)[0].split() == ["NAME", "REPLICAS", "READY", "AGE", "LABELS"]
    assert lines(wide.stdout)[1].split()[0] == "web" and len(lines(wide.stdout)) == 2
    as_json = json.loads((await cli("get", "ps", "web", "-o", "json")).stdout)
    assert (as_json["apiVersion"], as_json["kind"], as_json["spec"]["replicas"]) == ("example.com/v1", "ProjectSet", 3)
    assert "readyReplicas: 2" in (await cli("get", "projectset/web", "-o", "yaml")).stdout
    assert lines((await cli("get", "ps", "-o", "name")).stdout) == ["projectset/db", "projectset/web"]


async def test_get_resourcedefinitions_and_delete_of_a_custom_object(cli: Caractrl, client: Client) -> None:
    await define_projectset(client)
    await client.resource(projectset_messages().ProjectSet).create(projectset("gone"))
    listed = await cli("get", "resourcedefinitions")
    assert lines(listed.stdout)[0].split() == ["NAME", "KIND", "SHORTNAMES", "AGE"]
    assert lines(listed.stdout)[1].split()[:3] == ["projectsets.example.com", "ProjectSet", "ps"]
    assert lines((await cli("get", "rd", "-o", "name")).stdout) == ["resourcedefinition/projectsets.example.com"]
    deleted = await cli("delete", "ps", "gone")
    assert deleted.exit_code == 0, deleted.stderr
    assert "No resources found." in (await cli("get", "ps")).stderr


async def test_describe_a_custom_object(cli: Caractrl, client: Client) -> None:
    await define_projectset(client)
    await client.resource(projectset_messages().ProjectSet).create(projectset("web", replicas=3))
    result = await cli("describe", "ps", "web")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert lines(text)[0].split() == ["Name:", "web"] and lines(text)[1].split() == ["Kind:", "ProjectSet"]
    assert "replicas: 3" in text
