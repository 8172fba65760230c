"""Whatever the input, converting a Compose file gives a Project or one `ComposeError`: no other exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caravanserai.compose import ComposeError, convert_text
from caravanserai.compose.schema import compose_schema

SERVICE_KEYS = sorted(compose_schema()["definitions"]["service"]["properties"])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from(["", "80", "8080:80", "a=b", "./x:/x", "/x", "CMD", "1m30s", "64m", "${X:-y}", "$$", "no"]),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
services = st.dictionaries(
    st.sampled_from(["web", "db", "my_app"]),
    st.dictionaries(st.sampled_from(SERVICE_KEYS), values, max_size=5).map(lambda d: {"image": "x", **d}),
    min_size=1,
    max_size=3,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(services=services, volumes=st.dictionaries(st.sampled_from(["data", "x"]), values, max_size=2))
def test_any_service_keys_give_a_project_or_one_compose_error(services: object, volumes: object) -> None:
    text = json.dumps({"services": services, "volumes": volumes})
    try:
        convert_text(text, source="compose.yaml", directory="/srv/app", environ={"X": "1"})
    except ComposeError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_a_project_or_one_compose_error(text: str) -> None:
    try:
        convert_text("services:\n  web:\n    image: x\n" + text, source="c.yaml", directory="/srv", environ={})
    except ComposeError as exc:
        assert "\n" not in str(exc)


def test_surrogate_escapes_make_their_character_or_one_error() -> None:
    """JSON escapes of a character outside the BMP arrive from YAML as two surrogate halves: joined; a half alone is
    one error naming where (found by the fuzz test above: it was a UnicodeEncodeError traceback)."""
    paired = '{"services": {"web": {"image": "x", "labels": {"\\ud800\\udc00": "\\ud83d\\ude00"}}}}'
    project = convert_text(paired, source="compose.yaml", directory="/srv/app").project
    service = project.spec.services[0]
    assert dict(service.labels) == {"\U00010000": "\U0001f600"}
    lone = '{"services": {"web": {"image": "x", "command": "\\ud800"}}}'
    with pytest.raises(ComposeError, match="unpaired surrogates") as info:
        convert_text(lone, source="compose.yaml", directory="/srv/app")
    assert "services.web.command" in str(info.value)
