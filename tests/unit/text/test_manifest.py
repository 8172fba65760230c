"""Manifest loading (YAML and JSON), its error messages, and output that loads back to equal objects."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from caravanserai import v1
from caravanserai.errors import Invalid
from caravanserai.text import manifest
from caravanserai.text.manifest import dump_json, dump_yaml, load_manifests, to_dict
from caravanserai.text.manifestfiles import load_manifest_files

WEB = """\
apiVersion: caravanserai/v1
kind: Project
metadata:
  name: web
  labels:
    tier: 1           # an int in a string map
    zero: 010         # keeps its text
    on: true
    half: 0.50
    day: 2024-01-01   # a timestamp in a string map stays text
  generation: "7"     # int64 as a string
spec:
  services:
  - name: web
    image: nginx:1.27
    ports: [{containerPort: 80, hostPort: 8080}]
    resources:
      requests: {cpu: 0.5, memory: 512Mi, gpu: 1}
      limits: {cpu: 1e3}
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: true}
  volumes: [{name: data, type: Persistent}]
  node_selector: {disk: ssd}   # proto field names are accepted too
  expireAt: 2030-01-02
---
# an empty document is skipped
---
apiVersion: caravanserai/v1
kind: Node
metadata: {name: n1.example.com}
spec: {unschedulable: true, taints: [{key: dedicated, effect: NoSchedule}]}
"""


def _load_one(text: str) -> v1.Project:
    [obj] = load_manifests(text)
    assert isinstance(obj, v1.Project)
    return obj


def test_yaml_documents_become_objects() -> None:
    project, node = load_manifests(WEB, source="web.yaml")
    assert isinstance(project, v1.Project) and isinstance(node, v1.Node)
    assert dict(project.metadata.labels) == {
        "tier": "1",
        "zero": "010",
        "on": "true",
        "half": "0.50",
        "day": "2024-01-01",
    }
    assert project.metadata.generation == 7
    service = project.spec.services[0]
    assert service.image == "nginx:1.27"
    assert (service.ports[0].container_port, service.ports[0].host_port) == (80, 8080)
    assert dict(service.resources.requests) == {"cpu": "0.5", "memory": "512Mi", "gpu": "1"}
    assert dict(service.resources.limits) == {"cpu": "1e3"}
    assert service.volume_mounts[0].read_only is True
    assert dict(project.spec.node_selector) == {"disk": "ssd"}
    assert project.spec.expire_at.ToJsonString() == "2030-01-02T00:00:00Z"
    assert node.metadata.name == "n1.example.com" and node.spec.unschedulable
    assert node.spec.taints[0].effect == "NoSchedule"


@pytest.mark.parametrize(
    ("written", "rfc3339"),
    [
        ("2026-01-31T12:00:00Z", "2026-01-31T12:00:00Z"),
        ("2026-01-31T12:00:00.123456789Z", "2026-01-31T12:00:00.123456789Z"),
        ("2026-01-31T12:00:00+02:00", "2026-01-31T10:00:00Z"),
        ("2026-01-31 12:00:00", "2026-01-31T12:00:00Z"),
        ("2026-01-31t12:00:00.5Z", "2026-01-31T12:00:00.500Z"),
        ("2026-01-31 12:00:00 -5", "2026-01-31T17:00:00Z"),
        ("2026-01-31", "2026-01-31T00:00:00Z"),
        ('"2026-01-31T12:00:00Z"', "2026-01-31T12:00:00Z"),
    ],
)
def test_timestamps_in_any_yaml_form(written: str, rfc3339: str) -> None:
    text = f"apiVersion: caravanserai/v1\nkind: Project\nmetadata: {{name: a, creationTimestamp: {written}}}\n"
    assert _load_one(text).metadata.creation_timestamp.ToJsonString() == rfc3339


def test_json_objects_and_lists() -> None:
    single = json.dumps(
        {
            "apiVersion": "caravanserai/v1",
            "kind": "Lease",
            "metadata": {"name": "n1"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40},
        }
    )
    [lease] = load_manifests(single, source="lease.json")
    assert isinstance(lease, v1.Lease) and lease.spec.lease_duration_seconds == 40
    several = (
        '[{"apiVersion":"caravanserai/v1","kind":"Event","metadata":{"name":"e1"},'
        '"spec":{"count":"3","type":"Normal"}}, {"apiVersion":"caravanserai/v1","kind":"Node",'
        '"metadata":{"name":"n1","labels":{"n":1.50}}}]'
    )
    event, node = load_manifests(several)
    assert isinstance(event, v1.Event) and event.spec.count == 3
    assert isinstance(node, v1.Node) and node.metadata.labels["n"] == "1.50"


@pytest.mark.parametrize("text", ["", "\n", "# nothing here\n", "---\n---\n", "null\n"])
def test_empty_input_gives_no_objects(text: str) -> None:
    assert load_manifests(text) == []


def test_null_fields_stay_unset_and_integral_numbers_fit_integer_fields() -> None:
    project = _load_one(
        "apiVersion: caravanserai/v1\nkind: Project\nmetadata: {name: a, labels: null}\n"
        "spec: {priority: 1e2, services: [{name: a, ports: [{containerPort: 80.0}]}]}\n"
    )
    assert not project.metadata.labels
    assert project.spec.priority == 100
    assert project.spec.services[0].ports[0].container_port == 80


HEADER = "apiVersion: caravanserai/v1\nkind: Project\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: Project\nmetadata: {name: a}\n",
            "x.yaml, document 1, line 1: apiVersion: is required (caravanserai/v1)",
        ),
        (
            "apiVersion: v1\nkind: Project\n",
            'x.yaml, document 1, line 1: apiVersion: must be caravanserai/v1, not "v1"',
        ),
        (
            "apiVersion: caravanserai/v1\n",
            "x.yaml, document 1, line 1: kind: is required"
            " (one of AdmissionPolicy, BackupRepository, ClusterRole, ClusterRoleBinding, Config, Event, Lease,"
            " Namespace, Node, NodeGroup, Project, ProjectSet, ResourceDefinition, ResourceQuota, Role, RoleBinding,"
            " Route, Secret",
        ),
        (
            "apiVersion: caravanserai/v1\nkind: Pod\n",
            'x.yaml, document 1, line 2: kind: unknown kind "Pod":'
            " expected one of AdmissionPolicy, BackupRepository, ClusterRole, ClusterRoleBinding, Config, Event, Lease,"
            " Namespace, Node, NodeGroup, Project, ProjectSet, ResourceDefinition, ResourceQuota, Role, RoleBinding,"
            " Route, Secret",
        ),
        ("apiVersion: caravanserai/v1\nkind: [Project]\n", "x.yaml, document 1, line 2: kind: unknown kind a list"),
        ("- 1\n", "x.yaml, document 1, item 1: expected a mapping with apiVersion and kind, got an integer (1)"),
        ("just text\n", 'x.yaml, document 1: expected a mapping with apiVersion and kind, got a string "just text"'),
        (
            HEADER + "spec:\n  services:\n  - name: a\n    imag: x\n",
            'x.yaml, document 1, line 6: spec.services[0].imag: unknown field (did you mean "image"?)',
        ),
        (HEADER + "spec: {zzz: 1}\n", "x.yaml, document 1, line 3: spec.zzz: unknown field"),
        (
            HEADER + "metadata: {name: a, labels: {a: [1]}}\n",
            'x.yaml, document 1, line 3: metadata.labels["a"]: expected a string, got a list',
        ),
        (
            HEADER + "metadata: {name: a, labels: {a: }}\n",
            'x.yaml, document 1, line 3: metadata.labels["a"]: expected a string, got null',
        ),
        (HEADER + "metadata: {name: a, labels: {[x]: y}}\n", "keys must be strings, not a"),
        (
            HEADER + "metadata: {name: 1}\n",
            "x.yaml, document 1, line 3: metadata.name: expected a string, got an integer (1); quote it",
        ),
        (HEADER + "metadata: [a]\n", "x.yaml, document 1, line 3: metadata: expected a mapping, got a list"),
        (
            HEADER + "metadata: {finalizers: x}\n",
            'x.yaml, document 1, line 3: metadata.finalizers: expected a list, got a string "x"',
        ),
        (HEADER + "metadata: {labels: x}\n", 'metadata.labels: expected a mapping, got a string "x"'),
        (HEADER + "spec: {priority: high}\n", 'spec.priority: expected an integer, got a string "high"'),
        (HEADER + "spec: {priority: 1.5}\n", "spec.priority: expected an integer, got a number (1.5)"),
        (HEADER + "spec: {priority: true}\n", "spec.priority: expected an integer, got a boolean (true)"),
        (
            HEADER + "spec: {priority: 2147483648}\n",
            "spec.priority: must be between -2147483648 and 2147483647, not 2147483648",
        ),
        (HEADER + "metadata: {generation: '9223372036854775808'}\n", "metadata.generation: must be between"),
        (HEADER + "metadata: {generation: '1" + "0" * 50 + "'}\n", "metadata.generation: expected an integer"),
        (
            HEADER + "spec: {services: [{volumeMounts: [{readOnly: yes}]}]}\n",
            'spec.services[0].volumeMounts[0].readOnly: expected a boolean (true or false), got a string "yes"',
        ),
        (
            HEADER + "spec: {expireAt: tomorrow}\n",
            'spec.expireAt: expected an RFC 3339 time such as 2026-01-31T12:00:00Z, got a string "tomorrow"',
        ),
        (
            HEADER + "spec: {expireAt: 2026-13-45}\n",
            'spec.expireAt: expected an RFC 3339 time such as 2026-01-31T12:00:00Z, got a string "2026-13-45"',
        ),
        (HEADER + "spec: {expireAt: 5}\n", "spec.expireAt: expected an RFC 3339 time"),
        (
            HEADER + "spec: {nodeSelector: {a: b}, node_selector: {c: d}}\n",
            "spec.node_selector: duplicate field (also given as nodeSelector)",
        ),
        (
            HEADER + "metadata: {name: a, name: b}\n",
            'x.yaml, document 1: line 3, column 21: invalid YAML: found duplicate key "name" with value "b"',
        ),
        (HEADER + "metadata: {name: [\n", "x.yaml, document 1: line 4, column 1: invalid YAML:"),
        (HEADER + "metadata:\n\tname: a\n", "x.yaml, document 1: line 4, column 1: invalid YAML:"),
        (
            HEADER + "metadata: " + "[" * 100 + "]" * 100 + "\n",
            "invalid YAML: maximum depth of data structure exceeded",
        ),
        (HEADER + "metadata: *nowhere\n", "invalid YAML: found undefined alias 'nowhere'"),
    ],
)
def test_errors_name_source_document_and_field(text: str, message: str) -> None:
    with pytest.raises(Invalid) as info:
        load_manifests(text, source="x.yaml")
    assert message in str(info.value)
    assert info.value.violations


def test_the_documented_example_message_in_full() -> None:
    text = HEADER + "metadata: {name: a}\n---\n" + HEADER + "metadata: {name: b}\nspec:\n  services:\n  - imag: x\n"
    with pytest.raises(Invalid) as info:
        load_manifests(text, source="web.yaml")
    assert (
        str(info.value) == 'web.yaml, document 2, line 10: spec.services[0].imag: unknown field (did you mean "image"?)'
    )
    [violation] = info.value.violations
    assert (violation.field, violation.description) == (
        "spec.services[0].imag",
        'unknown field (did you mean "image"?)',
    )


def test_every_problem_of_every_document_is_reported() -> None:
    text = (
        HEADER + "spec: {priority: x, zzz: 1}\n---\nkind: Node\n---\n" + HEADER + "metadata: {name: ok}\n"
        "---\n" + "a: [\n"
    )
    with pytest.raises(Invalid) as info:
        load_manifests(text)
    assert str(info.value).split("; ") == [
        '<stdin>, document 1, line 3: spec.priority: expected an integer, got a string "x"',
        "<stdin>, document 1, line 3: spec.zzz: unknown field",
        "<stdin>, document 2, line 5: apiVersion: is required (caravanserai/v1)",
        "<stdin>, document 4: line 12, column 1: invalid YAML: expected the node content, but found '<stream end>'",
    ]
    assert [v.field for v in info.value.violations] == ["spec.priority", "spec.zzz", "apiVersion", ""]


def test_alias_expansion_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest, "MAX_VALUES", 10_000)
    command = "[" + ", ".join(["x"] * 100) + "]"
    services = "[" + ", ".join(["*s"] * 200) + "]"
    text = (
        HEADER + f"metadata: {{name: a}}\nx-template: &s {{name: a, command: {command}}}\nspec: {{services: "
        f"{services}}}\n"
    )
    with pytest.raises(Invalid) as info:
        load_manifests(text)
    assert "<stdin>, document 1, line 1: too large: more than 10000 values" in str(info.value)
    assert "x-template: unknown field" in str(info.value)


def test_aliases_within_the_budget_are_expanded() -> None:
    text = HEADER + "metadata: {name: a, labels: &l {a: b}, annotations: *l}\n"
    assert dict(_load_one(text).metadata.annotations) == {"a": "b"}


def complex_objects() -> list[v1.Project | v1.Node | v1.Lease | v1.Event]:
    project = v1.Project(
        api_version="caravanserai/v1",
        kind="Project",
        metadata=v1.ObjectMeta(
            name="shop",
            uid="u-1",
            labels={"tier": "1", "b": "true", "a": ""},
            annotations={"note": "line one\nline two: with colon", "t": "2024-01-01"},
            resource_version="42",
            generation=9_007_199_254_740_993,
            finalizers=["x.io/y"],
        ),
        spec=v1.ProjectSpec(
            services=[
                v1.Service(
                    name="web",
                    image="nginx",
                    command=["sh", "-c", "echo 'hi' # not a comment"],
                    env=[v1.EnvVar(name="EMPTY"), v1.EnvVar(name="N", value="010")],
                    ports=[v1.ServicePort(container_port=80, host_port=8080, protocol="UDP")],
                    volume_mounts=[v1.VolumeMount(name="d", mount_path="/d", read_only=True)],
                    resources=v1.ResourceRequirements(requests={"cpu": "500m"}, limits={"cpu": "1"}),
                )
            ],
            volumes=[v1.Volume(name="d")],
            tolerations=[v1.Toleration(operator="Exists")],
            priority=-3,
        ),
        status=v1.ProjectStatus(
            phase="Running",
            node_ref="n1",
            observed_generation=3,
            conditions=[v1.Condition(type="Ready", status="True", reason="Up")],
        ),
    )
    project.metadata.creation_timestamp.FromJsonString("2026-01-31T12:00:00.123456789Z")
    project.status.conditions[0].last_transition_time.FromJsonString("1999-12-31T23:59:59Z")
    node = v1.Node(
        api_version="caravanserai/v1",
        kind="Node",
        metadata=v1.ObjectMeta(name="n1"),
        status=v1.NodeStatus(
            state="Ready", capacity={"cpu": "4", "memory": "16Gi"}, network=v1.NodeNetwork(agent_port=7421)
        ),
    )
    lease = v1.Lease(
        api_version="caravanserai/v1",
        kind="Lease",
        metadata=v1.ObjectMeta(name="n1"),
        spec=v1.LeaseSpec(holder_identity="n1", lease_duration_seconds=40),
    )
    event = v1.Event(
        api_version="caravanserai/v1",
        kind="Event",
        metadata=v1.ObjectMeta(name="e.1"),
        spec=v1.EventSpec(type="Warning", reason="Failed", message="ünïcode ✓", count=2),
    )
    return [project, node, lease, event]


def test_yaml_round_trip() -> None:
    objects = complex_objects()
    text = dump_yaml(objects)
    assert text.count("\n---\n") == 3
    assert load_manifests(text) == objects


def test_json_round_trip() -> None:
    objects = complex_objects()
    assert load_manifests(dump_json(objects)) == objects
    assert load_manifests(dump_json(objects[:1])) == objects[:1]
    assert json.loads(dump_json(objects[:1]))["kind"] == "Project"
    assert json.loads(dump_json([])) == []


def test_to_dict_is_camel_case_compact_and_sorted() -> None:
    project = complex_objects()[0]
    data = to_dict(project)
    assert list(data) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert data["metadata"]["generation"] == 9_007_199_254_740_993
    assert data["metadata"]["creationTimestamp"] == "2026-01-31T12:00:00.123456789Z"
    assert list(data["metadata"]["labels"]) == ["a", "b", "tier"]
    assert data["spec"]["services"][0]["env"] == [{"name": "EMPTY"}, {"name": "N", "value": "010"}]
    assert data["spec"]["services"][0]["volumeMounts"] == [{"name": "d", "mountPath": "/d", "readOnly": True}]
    assert data["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert to_dict(v1.Lease(metadata=v1.ObjectMeta(name="x"), status=v1.LeaseStatus())) == {"metadata": {"name": "x"}}


def test_dump_yaml_quotes_strings_that_would_read_as_other_types() -> None:
    text = dump_yaml(complex_objects()[:1])
    assert "tier: '1'" in text and "b: 'true'" in text and "value: '010'" in text
    assert "creationTimestamp: '2026-01-31T12:00:00.123456789Z'" in text
    assert "generation: 9007199254740993" in text


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _node(name: str) -> str:
    return f"apiVersion: caravanserai/v1\nkind: Node\nmetadata: {{name: {name}}}\n"


def test_load_manifest_files_reads_files_directories_and_stdin(tmp_path: Path) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    _write(folder / "b.yml", _node("b"))
    _write(folder / "a.yaml", _node("a") + "---\n" + _node("a2"))
    _write(folder / "c.json", json.dumps({"apiVersion": "caravanserai/v1", "kind": "Node", "metadata": {"name": "c"}}))
    _write(folder / "notes.txt", "not a manifest")
    (folder / "sub.yaml").mkdir()
    single = _write(tmp_path / "single.yaml", _node("s"))
    objects = load_manifest_files([str(single), str(folder), "-"], stdin=io.StringIO(_node("in")))
    assert [o.metadata.name for o in objects] == ["s", "a", "a2", "b", "c", "in"]


def test_load_manifest_files_reports_every_problem(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.yaml", _node("x") + "spec: {zzz: 1}\n")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    missing = tmp_path / "missing.yaml"
    with pytest.raises(Invalid) as info:
        load_manifest_files([str(bad), str(missing), str(binary)])
    assert str(info.value).split("; ") == [
        f"{bad}, document 1, line 4: spec.zzz: unknown field",
        f"{missing}: cannot read: No such file or directory",
        f"{binary}: cannot read: not UTF-8 text",
    ]


def test_load_manifest_files_accepts_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + _node("bom").encode())
    assert [o.metadata.name for o in load_manifest_files([str(path)])] == ["bom"]


def test_list_documents_contribute_their_items() -> None:
    text = textwrap.dedent("""\
        apiVersion: v1
        kind: NodeList
        items:
        - {apiVersion: caravanserai/v1, kind: Node, metadata: {name: a, creationTimestamp: 2026-01-31}}
        - {apiVersion: caravanserai/v1, kind: Node, metadata: {name: b}, spec: {bogus: 1}}
        """)
    with pytest.raises(Invalid) as info:
        load_manifests(text, source="nodes.yaml")
    assert str(info.value) == "nodes.yaml, document 1, item 2, line 5: spec.bogus: unknown field"
    [node] = load_manifests(text.replace("spec: {bogus: 1}", "spec: {}"))[1:]
    assert node.metadata.name == "b"
    assert load_manifests("kind: ProjectList\nitems: []\n") == []


def test_a_leading_zero_integer_is_refused_as_ambiguous() -> None:
    text = (
        "apiVersion: caravanserai/v1\nkind: Project\nmetadata: {name: a}\n"
        "spec:\n  services: [{name: w, image: i, ports: [{containerPort: %s}]}]\n"
    )
    with pytest.raises(Invalid, match=r"spec.services\[0\].ports\[0\].containerPort: 0080 is ambiguous .* 0o80"):
        load_manifests(text % "0080", source="x.yaml")
    assert load_manifests(text % "80", source="x.yaml")[0].spec.services[0].ports[0].container_port == 80  # type: ignore[union-attr]  # the manifest holds one Project


@pytest.mark.parametrize(
    ("written", "mode"),
    [("0400", 0o400), ("0o400", 0o400), ("256", 0o400), ('"0400"', 0o400), ('"0o440"', 0o440), ('"256"', 256)],
)
def test_a_file_mode_with_a_leading_zero_is_octal(written: str, mode: int) -> None:
    """The schema's example (0400) works: in a file mode a leading zero means octal, as for chmod."""
    text = (
        "apiVersion: caravanserai/v1\nkind: Project\nmetadata: {name: a}\n"
        "spec:\n  volumes: [{name: v, type: Secret, secret: s, mode: %s}]\n"
        "  services: [{name: w, image: i, tmpfs: [{mountPath: /t, mode: %s}]}]\n"
    )
    [project] = load_manifests(text % (written, written), source="x.yaml")
    assert isinstance(project, v1.Project)
    assert project.spec.volumes[0].mode == mode
    assert project.spec.services[0].tmpfs[0].mode == mode


def test_a_file_mode_with_a_leading_zero_needs_octal_digits() -> None:
    text = (
        "apiVersion: caravanserai/v1\nkind: Project\nmetadata: {name: a}\n"
        "spec:\n  volumes: [{name: v, type: Secret, secret: s, mode: 0800}]\n  services: [{name: w, image: i}]\n"
    )
    with pytest.raises(Invalid, match=r"spec.volumes\[0\].mode: 0800 is not an octal file mode"):
        load_manifests(text, source="x.yaml")


def test_a_bad_field_that_came_through_a_merge_key_is_refused_with_its_path() -> None:
    # A key brought in by `<<:` has no line of its own: the refusal names the field at the nearest line found.
    text = "apiVersion: caravanserai/v1\nkind: Project\nmetadata:\n  <<: {name: [1]}\n"
    with pytest.raises(Invalid, match=r"x\.yaml, document 1, line 3: metadata\.name"):
        load_manifests(text, source="x.yaml")
