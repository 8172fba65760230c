"""caractrl on custom kinds, as an operator author meets them: kind.group names, `-o jsonpath`, `wait --for` on a
status field or a template, the line of a bad field, enums at their zero value, events of the current object
only, and a re-define that keeps the printer columns it was not given."""

from __future__ import annotations

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai.client import Client
from caravanserai.controller import EventRecorder
from support.customkinds import define_webfarm, example_proto, webfarm, webfarm_messages

SET = """apiVersion: example.com/v1
kind: WebFarm
metadata:
  name: web
spec:
  replicas: 2
  selector:
    app: web
"""


async def _sets(client: Client) -> None:
    await define_webfarm(client)
    sets = client.resource(webfarm_messages().WebFarm)
    web = await sets.create(webfarm("web", replicas=3))
    web.status.ready_replicas = 2
    await sets.update_status(web)
    await sets.create(webfarm("db", replicas=1))


async def test_a_kind_is_named_by_plural_or_kind_dot_group(cli: Caractrl, client: Client) -> None:
    await _sets(client)
    for name in ("webfarms.example.com", "webfarm.example.com", "WebFarm.example.com"):
        result = await cli("get", name)
        assert result.exit_code == 0, result.stderr
        assert [line.split()[0] for line in result.stdout.splitlines()] == ["NAME", "db", "web"]
    one = await cli("get", "webfarms.example.com/web", "-o", "name")
    assert (one.exit_code, one.stdout) == (0, "webfarm/web\n"), one.stderr
    wrong = await cli("get", "webfarms.other.org")
    assert wrong.exit_code == 2 and 'doesn\'t have a resource type "webfarms.other.org"' in wrong.stderr


async def test_output_jsonpath(cli: Caractrl, client: Client) -> None:
    await _sets(client)
    names = await cli("get", "wf", "-o", "jsonpath={.items[*].metadata.name}")
    assert (names.exit_code, names.stdout) == (0, "db web"), names.stderr
    table = await cli("get", "wf", "-o", 'jsonpath={range .items[*]}{.metadata.name}={.spec.replicas}{"\\n"}{end}')
    assert table.stdout == "db=1\nweb=3\n"
    one = await cli("get", "wf", "web", "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}")
    assert one.stdout == "2/3"
    bad = await cli("get", "wf", "-o", "jsonpath={range .items[*]}")
    assert bad.exit_code == 2 and "bad jsonpath template: {range} without {end}" in bad.stderr


async def test_wait_for_a_status_field_or_a_template_on_a_custom_kind(cli: Caractrl, client: Client) -> None:
    await _sets(client)
    for condition in ("readyReplicas=2", "jsonpath={.status.readyReplicas}=2", "jsonpath=.spec.replicas=3"):
        result = await cli("wait", "wf", "web", "--for", condition, "--timeout", "5s")
        assert (result.exit_code, result.stdout) == (0, "webfarm/web condition met\n"), (condition, result.stderr)
    late = await cli("wait", "wf", "web", "--for", "readyReplicas=3", "--timeout", "0.3s")
    assert late.exit_code == 1 and "timed out waiting for the condition on webfarms/web" in late.stderr


async def test_a_bad_field_is_reported_at_its_own_line(cli: Caractrl, client: Client) -> None:
    await define_webfarm(client)
    bad = await cli("apply", "-f", "-", input=SET.replace("replicas: 2", "replicas: two"))
    assert bad.exit_code == 1
    assert "<stdin>, document 1, line 6: spec.replicas: expected an integer" in bad.stderr, bad.stderr


async def test_enums_at_their_zero_value_are_shown(cli: Caractrl, client: Client) -> None:
    await _sets(client)  # updatePolicy left at IN_PLACE (0)
    as_yaml = await cli("get", "wf", "web", "-o", "yaml")
    assert "  updatePolicy: IN_PLACE\n" in as_yaml.stdout, as_yaml.stdout
    described = await cli("describe", "wf", "web")
    assert "updatePolicy: IN_PLACE" in described.stdout, described.stdout


async def test_events_for_an_object_are_those_of_the_current_object(cli: Caractrl, client: Client) -> None:
    await define_webfarm(client)
    sets = client.resource(webfarm_messages().WebFarm)
    recorder = EventRecorder(client, component="test")
    first = await sets.create(webfarm("web"))
    await recorder.normal(first, "Earlier", "about the first web")
    await sets.delete("web")
    second = await sets.create(webfarm("web"))
    await recorder.normal(second, "Current", "about the second web")
    result = await cli("get", "events", "--for", "wf/web")
    assert result.exit_code == 0, result.stderr
    assert "Current" in result.stdout and "Earlier" not in result.stdout, result.stdout


async def test_redefining_without_columns_keeps_them_and_says_what_changed(cli: Caractrl, client: Client) -> None:
    base = ["define", "--proto", str(example_proto()), "--kind", "WebFarm", "--group", "example.com"]
    created = await cli(*base, "--short-name", "wf", "--column", "DESIRED=.spec.replicas")
    assert created.stdout == "resourcedefinition/webfarms.example.com created\n", created.stderr
    again = await cli(*base)  # no --column, no --short-name: both kept
    assert again.stdout == "resourcedefinition/webfarms.example.com unchanged\n", again.stderr
    stored = await client.resourcedefinitions.get("webfarms.example.com")
    assert [(c.name, c.json_path) for c in stored.spec.printer_columns] == [("DESIRED", ".spec.replicas")]
    assert list(stored.spec.short_names) == ["wf"]
    changed = await cli(*base, "--column", "READY=.status.readyReplicas")
    assert changed.stdout == "resourcedefinition/webfarms.example.com configured: printerColumns\n"
