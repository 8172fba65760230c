"""Label and field selectors and the label name rules, table-driven."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caravanserai import v1
from caravanserai.errors import Invalid
from caravanserai.text.selectors import (
    FieldRequirement,
    FieldSelector,
    LabelRequirement,
    LabelSelector,
    fields_of,
    object_fields,
    validate_dns_label,
    validate_dns_subdomain,
    validate_label_key,
    validate_label_value,
    validate_reference,
)

LABELS = {"tier": "web", "env": "prod", "canary": "", "example.com/team": "blue"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("   ", True),
        ("tier=web", True),
        ("tier==web", True),
        ("tier = web", True),
        ("tier=db", False),
        ("tier!=db", True),
        ("tier!=web", False),
        ("missing!=x", True),
        ("missing=x", False),
        ("canary=", True),
        ("tier=", False),
        ("env in (prod,staging)", True),
        ("env in (staging, dev)", False),
        ("env in(prod)", True),
        ("missing in (x)", False),
        ("env notin (prod)", False),
        ("env notin (dev, staging)", True),
        ("missing notin (x)", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("! tier", False),
        ("example.com/team=blue", True),
        ("tier=web,env=prod", True),
        (" tier = web , env in ( prod ) , !missing ", True),
        ("tier=web,env=dev", False),
        ("in", False),
        ("notin!=x", True),
    ],
)
def test_label_selector_matches(text: str, matches: bool) -> None:
    assert LabelSelector.parse(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("a==b", "a=b"),
        (" a = b ,c!=d", "a=b,c!=d"),
        ("e in ( x , y )", "e in (x,y)"),
        ("f notin (z)", "f notin (z)"),
        ("g, !h", "g,!h"),
        ("a=", "a="),
        ("x.io/k in (a,)", "x.io/k in (a,)"),
    ],
)
def test_label_selector_str_is_canonical_and_round_trips(text: str, canonical: str) -> None:
    selector = LabelSelector.parse(text)
    assert str(selector) == canonical
    assert LabelSelector.parse(str(selector)) == selector


def test_label_selector_structure() -> None:
    assert LabelSelector.parse("a in (x,y), !b").requirements == (
        LabelRequirement("a", "in", ("x", "y")),
        LabelRequirement("b", "notexists"),
    )
    assert LabelSelector.parse("").empty
    assert not LabelSelector.parse("a").empty


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=b,", "expected a requirement after the trailing ','"),
        (",a", "expected a label key at position 0, found ','"),
        ("a b", "expected '=', '==', '!=', 'in' or 'notin' after key 'a' at position 2, found 'b'"),
        ("a=b c", "expected ',' at position 4, found 'c'"),
        ("a in x", "expected '(' at position 5, found 'x'"),
        ("a in (x", "unexpected end of selector"),
        ("a in (x y)", "expected ',' or ')' at position 8, found 'y'"),
        ("a in ()", "the value set of 'in' and 'notin' must not be empty"),
        ("a notin", "unexpected end of selector"),
        ("!", "unexpected end of selector"),
        ("!=a", "expected a label key at position 0, found '!='"),
        ("!a=b", "expected ',' at position 2, found '='"),
        ("Bad Key=x", "expected '=', '==', '!=', 'in' or 'notin' after key 'Bad'"),
        ("-a=b", "invalid label key '-a'"),
        ("a/b/c=d", "invalid label key 'a/b/c': must contain at most one '/'"),
        ("a=b!", "expected ',' at position 3, found '!'"),
        ("a=-b", "label value '-b' must be empty or"),
        ("a in (x,-y)", "label value '-y' must be empty or"),
        ("a=" + "x" * 64, "label value"),
    ],
)
def test_label_selector_refuses(text: str, message: str) -> None:
    with pytest.raises(Invalid) as info:
        LabelSelector.parse(text)
    assert [v.field for v in info.value.violations] == ["labelSelector"]
    assert message in info.value.violations[0].description
    assert str(info.value).startswith("invalid label selector: labelSelector: ")


_LABEL_NAMES = st.from_regex(r"[a-z]([a-z0-9]{0,6}[a-z0-9])?", fullmatch=True)
_VALUE_LISTS = st.lists(_LABEL_NAMES, min_size=1, max_size=3)


@given(
    st.lists(
        st.one_of(
            st.builds(lambda k, v: LabelRequirement(k, "=", (v,)), _LABEL_NAMES, _LABEL_NAMES),
            st.builds(lambda k, v: LabelRequirement(k, "!=", (v,)), _LABEL_NAMES, _LABEL_NAMES),
            st.builds(lambda k, vs: LabelRequirement(k, "in", tuple(vs)), _LABEL_NAMES, _VALUE_LISTS),
            st.builds(lambda k, vs: LabelRequirement(k, "notin", tuple(vs)), _LABEL_NAMES, _VALUE_LISTS),
            st.builds(lambda k: LabelRequirement(k, "exists"), _LABEL_NAMES),
            st.builds(lambda k: LabelRequirement(k, "notexists"), _LABEL_NAMES),
        ),
        max_size=5,
    ),
    st.dictionaries(_LABEL_NAMES, _LABEL_NAMES, max_size=5),
)
def test_label_selector_round_trips_and_is_a_conjunction(
    requirements: list[LabelRequirement], labels: dict[str, str]
) -> None:
    selector = LabelSelector(tuple(requirements))
    assert LabelSelector.parse(str(selector)) == selector
    assert selector.matches(labels) == all(LabelSelector((r,)).matches(labels) for r in requirements)


@pytest.mark.parametrize(
    ("text", "fields", "matches"),
    [
        ("", {}, True),
        ("status.phase=Pending", {"status.phase": "Pending"}, True),
        ("status.phase==Pending", {"status.phase": "Running"}, False),
        ("status.phase!=Pending", {"status.phase": "Running"}, True),
        ("status.nodeRef=", {"status.nodeRef": ""}, True),
        ("status.nodeRef=", {}, True),
        ("status.nodeRef!=", {"status.nodeRef": "n1"}, True),
        (
            " status.nodeRef = n1.example.com , metadata.name!=web ",
            {"status.nodeRef": "n1.example.com", "metadata.name": "db"},
            True,
        ),
        ("status.nodeRef=n1,metadata.name!=web", {"status.nodeRef": "n1", "metadata.name": "web"}, False),
    ],
)
def test_field_selector_matches(text: str, fields: dict[str, str], matches: bool) -> None:
    assert FieldSelector.parse(text).matches(fields) is matches


def test_field_selector_round_trips() -> None:
    selector = FieldSelector.parse("status.phase==Pending, metadata.name != web")
    assert selector.requirements == (
        FieldRequirement("status.phase", "=", "Pending"),
        FieldRequirement("metadata.name", "!=", "web"),
    )
    assert str(selector) == "status.phase=Pending,metadata.name!=web"
    assert FieldSelector.parse(str(selector)) == selector
    assert FieldSelector.parse(" ").empty


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "spec.hostname=x",
            "unknown field 'spec.hostname': supported fields are involvedObject.kind, "
            "involvedObject.name, involvedObject.namespace, involvedObject.uid, metadata.name, metadata.namespace, "
            "reason, status.nodeRef, status.phase, type",
        ),
        ("status.phase", "expected 'field=value', 'field==value' or 'field!=value', found 'status.phase'"),
        ("status.phase=a b", "found 'status.phase=a b'"),
        ("status.phase=Pending,", "found ''"),
        ("=x", "unknown field ''"),
        ("status.phase in (a)", "expected 'field=value'"),
    ],
)
def test_field_selector_refuses(text: str, message: str) -> None:
    with pytest.raises(Invalid) as info:
        FieldSelector.parse(text)
    assert [v.field for v in info.value.violations] == ["fieldSelector"]
    assert message in info.value.violations[0].description


def test_object_fields_for_every_kind() -> None:
    project = v1.Project(
        metadata=v1.ObjectMeta(name="web", namespace="team-a"), status=v1.ProjectStatus(phase="Running", node_ref="n1")
    )
    assert object_fields(project) == {
        "metadata.name": "web",
        "metadata.namespace": "team-a",
        "status.phase": "Running",
        "status.nodeRef": "n1",
    }
    assert object_fields(v1.Project()) == {
        "metadata.name": "",
        "metadata.namespace": "",
        "status.phase": "",
        "status.nodeRef": "",
    }
    node = v1.Node(metadata=v1.ObjectMeta(name="n1"), status=v1.NodeStatus(state="Ready"))
    assert object_fields(node) == {"metadata.name": "n1", "metadata.namespace": ""}
    assert object_fields(v1.Lease(metadata=v1.ObjectMeta(name="l"))) == {"metadata.name": "l", "metadata.namespace": ""}
    event = v1.Event(metadata=v1.ObjectMeta(name="web.1", namespace="default"))
    event.spec.involved_object.kind = "Project"
    event.spec.involved_object.name = "web"
    event.spec.reason = "Scheduled"
    event.spec.type = "Normal"
    assert object_fields(event) == {
        "metadata.name": "web.1",
        "metadata.namespace": "default",
        "involvedObject.kind": "Project",
        "involvedObject.name": "web",
        "involvedObject.namespace": "",
        "involvedObject.uid": "",
        "reason": "Scheduled",
        "type": "Normal",
    }
    for kind in ("Project", "Node", "Lease", "Event"):
        assert set(fields_of(kind)) >= {"metadata.name"}
    assert FieldSelector.parse("status.nodeRef=n1").matches(object_fields(project))
    assert not FieldSelector.parse("status.phase=Running").matches(object_fields(node))
    selector = FieldSelector.parse("involvedObject.kind=Project,involvedObject.name=web,type!=Warning", kind="Event")
    assert selector.matches(object_fields(event))
    assert not FieldSelector.parse("reason=Failed", kind="Event").matches(object_fields(event))


def test_field_selector_of_a_kind_names_only_its_fields() -> None:
    with pytest.raises(
        Invalid,
        match=r"unknown field 'reason': supported fields of Project are metadata.name, metadata.namespace, "
        r"status.nodeRef, status.phase",
    ):
        FieldSelector.parse("reason=Scheduled", kind="Project")
    with pytest.raises(Invalid, match=r"supported fields of Node are metadata.name, metadata.namespace$"):
        FieldSelector.parse("status.phase=Running", kind="Node")


def test_label_selector_accepts_protobuf_maps() -> None:
    meta = v1.ObjectMeta(labels={"tier": "web"})
    assert LabelSelector.parse("tier=web,!env").matches(meta.labels)
    assert not LabelSelector.parse("tier notin (web)").matches(meta.labels)


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("app", True),
        ("App_1.x-y", True),
        ("a", True),
        ("example.com/app", True),
        ("a.b-c.d/Z9", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("a" * 253 + "/x", False),
        (".".join(["a" * 62] * 4) + "/x", True),
        (".".join(["a" * 62] * 4) + "aaa/x", False),
        ("", False),
        ("-app", False),
        ("app-", False),
        ("_a", False),
        ("Bad Key", False),
        ("/app", False),
        ("example.com/", False),
        ("Example.com/app", False),
        ("a/b/c", False),
        ("ünï", False),
        ("a..b/c", False),
    ],
)
def test_validate_label_key(key: str, valid: bool) -> None:
    assert (validate_label_key(key) is None) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("", True),
        ("web", True),
        ("1", True),
        ("a.b_c-D", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("-a", False),
        ("a-", False),
        ("a b", False),
        ("a/b", False),
    ],
)
def test_validate_label_value(value: str, valid: bool) -> None:
    assert (validate_label_value(value) is None) is valid


@pytest.mark.parametrize(
    ("name", "label", "subdomain"),
    [
        ("web", True, True),
        ("web-1", True, True),
        ("1web", True, True),
        ("a", True, True),
        ("node.example.com", False, True),
        ("x" * 63, True, True),
        ("x" * 64, False, False),
        (".".join(["x" * 63] * 4), False, False),
        (".".join(["x" * 62] * 4), False, True),
        ("Web", False, False),
        ("-web", False, False),
        ("web-", False, False),
        ("a..b", False, False),
        (".a", False, False),
        ("a_b", False, False),
        ("", False, False),
    ],
)
def test_dns_names(name: str, label: bool, subdomain: bool) -> None:
    assert (validate_dns_label(name) is None) is label
    assert (validate_dns_subdomain(name) is None) is subdomain


def test_a_reference_is_a_name_in_the_referring_objects_namespace() -> None:
    assert validate_reference("db.creds") is None
    assert validate_reference("Db") == validate_dns_subdomain("Db")
    crossing = validate_reference("team-b/db")
    assert crossing is not None and "'team-b'" in crossing and "cannot cross namespaces" in crossing


def test_long_input_is_cut_in_messages() -> None:
    with pytest.raises(Invalid) as info:
        LabelSelector.parse("a=" + "x" * 10_000 + " b")
    assert len(str(info.value)) < 500
    assert "…" in str(info.value)
