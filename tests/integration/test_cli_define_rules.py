"""`caractrl define --rules FILE` and definition manifests carrying field rules, CEL validations and hooks."""

from __future__ import annotations

from pathlib import Path

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai.client import Client
from support.customkinds import example_proto

RULES = """\
fieldRules:
- path: spec.replicas
  minimum: 1
  maximum: 5
  default: "1"
validations:
- rule: "self.replicas <= 3 || self.updatePolicy == 'ON_DELETE'"
  message: more than 3 replicas need updatePolicy ON_DELETE
  fieldPath: spec.replicas
"""

SET = """\
apiVersion: example.com/v1
kind: WebFarm
metadata:
  name: web
spec:
  replicas: 4
  selector: {set: web}
"""

DEFINE = ("define", "--proto", str(example_proto()), "--kind", "WebFarm", "--group", "example.com")


async def test_define_with_a_rules_file_then_apply_refuses_with_the_field_path(
    cli: Caractrl, client: Client, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    manifest = await cli(*DEFINE, "--rules", str(rules), "-o", "yaml")
    assert manifest.exit_code == 0, manifest.stderr
    assert "fieldRules:" in manifest.stdout and "validations:" in manifest.stdout
    applied = await cli("apply", "-f", "-", input=manifest.stdout)  # the rules travel in the manifest
    assert applied.exit_code == 0, applied.stderr
    stored = await client.resourcedefinitions.get("webfarms.example.com")
    assert [r.path for r in stored.spec.field_rules] == ["spec.replicas"] and len(stored.spec.validations) == 1
    refused = await cli("apply", "-f", "-", input=SET)
    assert refused.exit_code == 1
    assert "spec.replicas: more than 3 replicas need updatePolicy ON_DELETE" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    created = await cli("apply", "-f", "-", input=SET.replace("replicas: 4", "replicas: 0"))
    assert created.exit_code == 0, created.stderr
    assert (await client.resource("webfarms").get("web")).spec.replicas == 1  # the default


async def test_define_names_a_bad_rules_file_in_one_line(cli: Caractrl, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("fieldRules:\n- path: spec.replicas\n  minimun: 1\n")
    result = await cli(*DEFINE, "--rules", str(rules))
    assert result.exit_code == 1 and "fieldRules[0].minimun" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    rules.write_text("fieldRules:\n- path: spec.nope\n")
    result = await cli(*DEFINE, "--rules", str(rules))
    assert result.exit_code == 1 and "spec.fieldRules[0].path" in result.stderr and "nope" in result.stderr


async def test_redefining_without_rules_keeps_the_stored_rules_and_says_what_changed(
    cli: Caractrl, client: Client, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    first = await cli(*DEFINE, "--rules", str(rules))
    assert first.exit_code == 0, first.stderr
    again = await cli(*DEFINE)  # a schema-only re-define, as an operator's deployment does on upgrade
    assert again.exit_code == 0, again.stderr
    stored = await client.resourcedefinitions.get("webfarms.example.com")
    assert [r.path for r in stored.spec.field_rules] == ["spec.replicas"] and len(stored.spec.validations) == 1
    rules.write_text("fieldRules:\n- path: spec.replicas\n  maximum: 9\n")
    changed = await cli(*DEFINE, "--rules", str(rules))
    assert changed.exit_code == 0, changed.stderr
    assert "fieldRules" in changed.stdout and "validations" in changed.stdout, changed.stdout
    stored = await client.resourcedefinitions.get("webfarms.example.com")
    assert [r.maximum for r in stored.spec.field_rules] == [9] and not stored.spec.validations
