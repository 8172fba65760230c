"""`caractrl convert` and `caractrl apply -f compose.yaml` against a real apiserver over a real etcd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai.client import Client
from caravanserai.errors import NotFound

COMPOSE = """\
name: shop
services:
  web:
    image: ${IMAGE:-nginx:1.27}
    ports: ["8080:80"]
    depends_on:
      db: {condition: service_healthy}
    deploy: {replicas: 2}
  db:
    image: postgres:16
    environment: {POSTGRES_PASSWORD: example}
    healthcheck: {test: [CMD, pg_isready], interval: 5s}
    volumes: [db_data:/var/lib/postgresql/data]
volumes:
  db_data: {}
"""
REPLICAS = (
    "warning: {}: services.web.deploy.replicas: 2 replicas need a replicated project (not yet): one container runs"
)


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


async def test_convert_prints_the_manifest_and_warnings(cli: Caractrl, tmp_path: Path) -> None:
    path = write(tmp_path, "compose.yaml", COMPOSE)
    result = await cli("convert", path, server=False)
    assert result.exit_code == 0
    assert result.stdout.startswith("apiVersion: caravanserai/v1\nkind: Project\nmetadata:\n  name: shop\n")
    assert "image: nginx:1.27" in result.stdout
    assert result.stderr == REPLICAS.format(path) + "\n"
    as_json = await cli("convert", str(tmp_path), "-o", "json", "--name", "other", server=False)
    project = json.loads(as_json.stdout)
    assert project["metadata"]["name"] == "other"
    assert [s["name"] for s in project["spec"]["services"]] == ["web", "db"]


async def test_convert_refusal_is_one_line(cli: Caractrl, tmp_path: Path) -> None:
    path = write(tmp_path, "compose.yaml", "services:\n  web:\n    build: .\n")
    result = await cli("convert", path, server=False)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: {path}: services.web.build: build the image first (docker build -t NAME .) and set image: NAME\n"
    )
    missing = await cli("convert", str(tmp_path / "nope.yaml"), server=False)
    assert (missing.exit_code, missing.stderr.count("\n")) == (1, 1)


async def test_apply_a_compose_file_then_its_folder_then_delete(
    cli: Caractrl, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IMAGE", "nginx:1.28")
    path = write(tmp_path, "compose.yaml", COMPOSE)
    dry = await cli("apply", "-f", path, "--dry-run")
    assert (dry.exit_code, dry.stdout) == (0, "project/shop created (dry run)\n")
    with pytest.raises(NotFound):
        await client.projects.get("shop")
    first = await cli("apply", "-f", path)
    assert (first.exit_code, first.stdout, first.stderr) == (0, "project/shop created\n", REPLICAS.format(path) + "\n")
    stored = await client.projects.get("shop")
    assert [s.image for s in stored.spec.services] == ["nginx:1.28", "postgres:16"]
    assert stored.spec.services[0].depends_on[0].condition == "healthy"
    again = await cli("apply", "-f", str(tmp_path))
    assert (again.exit_code, again.stdout) == (0, "project/shop unchanged\n")
    deleted = await cli("delete", "-f", path)
    assert deleted.exit_code == 0
    with pytest.raises(NotFound):
        await client.projects.get("shop")


async def test_apply_reports_a_bad_compose_file_and_applies_the_others(
    cli: Caractrl, client: Client, tmp_path: Path
) -> None:
    bad = write(tmp_path, "bad.yaml", "services:\n  web:\n    image: x\n    extends: base\n")
    good = write(tmp_path, "good.yaml", "name: good\nservices:\n  web: {image: busybox}\n")
    result = await cli("apply", "-f", bad, "-f", good)
    assert result.exit_code == 1
    assert result.stdout == "project/good created\n"
    assert result.stderr == (
        f"error: {bad}: services.web.extends: is not supported: copy the keys of the extended service into this one\n"
    )
    assert (await client.projects.get("good")).spec.services[0].restart_policy == "Never"
