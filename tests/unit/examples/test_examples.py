"""Every example manifest loads and passes the apiserver's validation (the README and docs point at them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caravanserai import meta
from caravanserai.apiserver.kinds import validate_object
from caravanserai.compose import convert_file
from caravanserai.text.manifestfiles import load_manifest_files

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_valid(path: Path) -> None:
    objects = load_manifest_files([str(path)])
    assert objects
    for obj in objects:
        validate_object(meta.kind_of(obj).plural, obj)


COMPOSE_EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "compose").glob("*/compose.yaml"))


@pytest.mark.parametrize("path", COMPOSE_EXAMPLES, ids=lambda p: p.parent.name)
def test_compose_example_converts_without_a_warning_and_is_valid(path: Path) -> None:
    conversion = convert_file(str(path.parent), environ={})
    assert [str(n) for n in conversion.notes] == []
    assert conversion.project.metadata.name == path.parent.name
    validate_object("projects", conversion.project)
