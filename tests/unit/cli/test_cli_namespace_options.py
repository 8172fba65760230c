"""caractrl's namespaces without a server: `-n`/`-A` wherever typed, the config's default namespace, `get -A`'s
NAMESPACE column, apply's namespace rules, the Namespace view, `create namespace` (FakeClient stands in)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from caravanserai import meta, v1
from caravanserai.cli.caractrl import caractrl
from caravanserai.cli.config import ConfigError, Settings, load_config
from caravanserai.cli.kinds import VIEWS, columns_of, rows
from caravanserai.cli.scope import hoist
from caravanserai.cli.tables import RowContext
from caravanserai.testing import FakeClient, builders

NOW = 1_000.0


def in_namespace(name: str, namespace: str) -> v1.Project:
    project = builders.project(name)
    project.metadata.namespace = namespace
    project.metadata.creation_timestamp.seconds = int(NOW) - 60
    return project


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeClient]:
    """Every command talks to one FakeClient, whose namespace is the command's (as `Settings.client` sets it); the
    config file is one of the test's own."""
    client = FakeClient()

    def connect(settings: Settings) -> FakeClient:
        client.namespace = settings.default_namespace()
        return client

    monkeypatch.setattr(Settings, "client", connect)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for variable in ("CARA_NAMESPACE", "CARA_CONFIG", "CARA_SERVER", "CARA_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    yield client


def cli(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(caractrl, list(args), input=stdin, catch_exceptions=False)


# ---- options -------------------------------------------------------------------------------------------------


def test_namespace_options_move_before_the_command_wherever_typed() -> None:
    assert hoist(["get", "projects", "-n", "team-a"]) == ["-n", "team-a", "get", "projects"]
    assert hoist(["get", "-nteam-a", "p"]) == ["-nteam-a", "get", "p"]
    assert hoist(["get", "p", "--namespace=team-a", "-o", "yaml"]) == ["--namespace=team-a", "get", "p", "-o", "yaml"]
    assert hoist(["get", "p", "--namespace", "x", "-A"]) == ["--namespace", "x", "-A", "get", "p"]
    assert hoist(["get", "p", "--all-namespaces"]) == ["--all-namespaces", "get", "p"]
    # what follows `--` is exec's command line, never touched
    assert hoist(["exec", "web/app", "-n", "ns", "--", "ls", "-n"]) == ["-n", "ns", "exec", "web/app", "--", "ls", "-n"]


async def _seed(fake: FakeClient) -> None:
    for project in (in_namespace("web", "team-a"), in_namespace("web", "team-b"), in_namespace("api", "team-a")):
        await fake.projects.create(project)


@pytest.fixture
def seeded(fake: FakeClient) -> FakeClient:
    import asyncio  # noqa: PLC0415 - the seeding runs once, outside the commands' own loops

    asyncio.run(_seed(fake))
    return fake


def test_get_lists_the_commands_namespace_only(seeded: FakeClient) -> None:
    assert cli("get", "projects", "-n", "team-a", "-o", "name").output == "project/api\nproject/web\n"
    assert cli("-n", "team-b", "get", "projects", "-o", "name").output == "project/web\n"
    assert cli("get", "projects", "-o", "name").output == ""  # "default" holds none


def test_get_all_namespaces_puts_a_namespace_column_first(seeded: FakeClient) -> None:
    result = cli("get", "projects", "-A")
    lines = result.output.splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert [line.split()[:2] for line in lines[1:]] == [["team-a", "api"], ["team-a", "web"], ["team-b", "web"]]
    # a cluster-wide kind never has the column
    assert columns_of(meta.KINDS["nodes"], all_namespaces=True).header(False)[0] == "NAME"


def test_yaml_carries_the_namespace(seeded: FakeClient) -> None:
    assert "namespace: team-b" in cli("get", "project", "web", "-n", "team-b", "-o", "yaml").output


def test_describe_shows_the_namespace(seeded: FakeClient) -> None:
    text = cli("describe", "project", "web", "-n", "team-b").output
    assert any(line.split() == ["Namespace:", "team-b"] for line in text.splitlines())


def test_delete_in_one_namespace_leaves_the_other(seeded: FakeClient) -> None:
    assert cli("delete", "project", "web", "-n", "team-a", "--force").exit_code == 0
    assert cli("get", "projects", "-A", "-o", "name").output == "project/api\nproject/web\n"
    assert cli("get", "project", "web", "-n", "team-b", "-o", "name").output == "project/web\n"


# ---- the config's default namespace -----------------------------------------------------------------------------


def test_config_namespace_is_the_default_and_n_wins(fake: FakeClient, tmp_path: Path) -> None:
    config = tmp_path / "caravanserai" / "config.yaml"
    assert Settings().default_namespace() == "default"
    result = cli("config", "set-context", "--current", "--namespace=team-a")
    assert result.exit_code == 0, result.output
    assert load_config(config).namespace == "team-a"
    assert Settings().default_namespace() == "team-a"
    assert Settings(namespace="team-b").default_namespace() == "team-b"


def test_set_context_keeps_the_other_keys(fake: FakeClient, tmp_path: Path) -> None:
    config = tmp_path / "own.yaml"
    config.write_text("# mine\nserver: cara.example.org:7420\nnamespace: old\n")
    assert cli("--config", str(config), "config", "set-context", "--current", "-n", "new").exit_code == 0
    text = config.read_text()
    assert "# mine" in text and "server: cara.example.org:7420" in text
    assert load_config(config).namespace == "new"
    refused = cli("config", "set-context", "--current")
    assert refused.exit_code == 2 and "--namespace" in refused.output


def test_a_bad_namespace_is_refused_naming_the_option(fake: FakeClient) -> None:
    result = cli("get", "projects", "-n", "Team_A")
    assert result.exit_code == 2
    assert "--namespace" in result.output


# ---- apply -----------------------------------------------------------------------------------------------------

MANIFEST = """\
apiVersion: caravanserai/v1
kind: Project
metadata:
  name: web
{namespace}spec:
  services:
  - name: app
    image: busybox
"""


def test_apply_puts_an_object_without_namespace_into_n(fake: FakeClient) -> None:
    result = cli("apply", "-f", "-", "-n", "team-a", stdin=MANIFEST.format(namespace=""))
    assert result.exit_code == 0, result.output
    assert cli("get", "projects", "-A").output.splitlines()[1].split()[:2] == ["team-a", "web"]


def test_apply_refuses_an_object_of_another_namespace_than_n(fake: FakeClient) -> None:
    text = MANIFEST.format(namespace="  namespace: team-b\n")
    result = cli("apply", "-f", "-", "-n", "team-a", stdin=text)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "does not match the namespace" in lines[0] and "metadata.namespace" in lines[0]
    # without -n, the object's own namespace is used
    assert cli("apply", "-f", "-", stdin=text).exit_code == 0
    assert cli("get", "projects", "-n", "team-b", "-o", "name").output == "project/web\n"


def test_apply_without_n_uses_the_default_namespace(fake: FakeClient) -> None:
    assert cli("apply", "-f", "-", stdin=MANIFEST.format(namespace="")).exit_code == 0
    assert cli("get", "project", "web", "-o", "jsonpath={.metadata.namespace}").output == "default"


def test_apply_and_create_a_namespace(fake: FakeClient) -> None:
    text = "apiVersion: caravanserai/v1\nkind: Namespace\nmetadata:\n  name: team-c\n"
    result = cli("apply", "-f", "-", "-n", "team-a", stdin=text)  # -n means nothing to a cluster-wide kind
    assert result.exit_code == 0, result.output
    assert result.output == "namespace/team-c created\n"
    assert cli("create", "namespace", "team-d").output == "namespace/team-d created\n"
    assert cli("get", "ns", "-o", "name").output == "namespace/team-c\nnamespace/team-d\n"
    assert cli("delete", "namespace", "team-d").exit_code == 0


# ---- the Namespace view -------------------------------------------------------------------------------------------


def test_namespace_view_shows_status_and_age() -> None:
    namespace = meta.with_type_meta(v1.Namespace())
    namespace.metadata.name = "team-a"
    namespace.metadata.creation_timestamp.seconds = int(NOW) - 120
    terminating = meta.copy(namespace)
    terminating.metadata.name = "team-b"
    terminating.status.phase = v1.NAMESPACE_TERMINATING
    kind = meta.KINDS["namespaces"]
    assert "namespaces" in VIEWS
    assert columns_of(kind).header(False) == ["NAME", "STATUS", "AGE"]
    table = rows(kind, [terminating, namespace], RowContext(now=NOW), wide=False)
    assert table == [["team-a", "Active", "2m"], ["team-b", "Terminating", "2m"]]


def test_delete_by_manifest_uses_its_namespace_and_refuses_another_n(seeded: FakeClient, tmp_path: Path) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST.format(namespace="  namespace: team-b\n"))
    refused = cli("delete", "-f", str(manifest), "-n", "team-a", "--force")
    assert refused.exit_code == 1 and "does not match the namespace" in refused.output
    deleted = cli("delete", "-f", str(manifest), "--force")
    assert deleted.exit_code == 0, deleted.output
    assert cli("get", "projects", "-A", "-o", "name").output == "project/api\nproject/web\n"
    assert cli("get", "project", "web", "-n", "team-a", "-o", "name").output == "project/web\n"


def test_all_namespaces_is_refused_where_it_would_mean_nothing(seeded: FakeClient) -> None:
    by_name = cli("get", "project", "web", "-A")
    assert by_name.exit_code == 2 and "across all namespaces" in by_name.output
    elsewhere = cli("delete", "project", "web", "-A")
    assert elsewhere.exit_code == 2 and "-A/--all-namespaces" in elsewhere.output
    assert cli("get", "nodes", "-A").exit_code == 0  # a cluster-wide kind's listing is the same either way


def test_a_bad_namespace_in_the_config_file_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("namespace: Team_A\n")
    with pytest.raises(ConfigError, match="namespace: 'Team_A'"):
        load_config(config)
