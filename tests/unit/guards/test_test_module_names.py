"""Test modules are imported by basename (rootdir-relative, no packages): two with one name anywhere under tests/
stop the collection of the whole suite. This guard names them when only a part of the suite is run."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_every_test_module_has_a_basename_of_its_own() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: sorted(found) for name, found in places.items() if len(found) > 1}
    assert not shared, f"test modules sharing a basename (rename one of each): {shared}"
