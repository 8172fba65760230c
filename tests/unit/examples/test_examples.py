"""Every example manifest loads and passes the apiserver's validation (the README and docs point at them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caravanserai import meta
from caravanserai.apiserver.kinds import validate_object
from caravanserai.text.manifestfiles import load_manifest_files

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_valid(path: Path) -> None:
    objects = load_manifest_files([str(path)])
    assert objects
    for obj in objects:
        validate_object(meta.kind_of(obj).plural, obj)
