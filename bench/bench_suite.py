"""The test suite's wall time per tier, as the last `make test` (or any pytest run of the suite) recorded it in
test-artifacts/tier-times.json (written by tests/conftest.py at the end of every run). Prints JSON.

    .venv/bin/python bench/bench_suite.py

It runs nothing itself (the suite takes many minutes): the goal line is "not measured" until a run of the whole
suite has left its figures, and says when they were taken and under which load.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

from benchlib import goal

RECORD = pathlib.Path(__file__).resolve().parent.parent / "test-artifacts" / "tier-times.json"
TIERS = ("unit", "integration", "e2e", "faults", "security", "fleet")


def main() -> dict[str, Any]:
    try:
        record: dict[str, Any] = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        record = {}
    tiers = record.get("tiers_s", {})
    whole = all(tier in tiers for tier in TIERS if (RECORD.parent.parent / "tests" / tier).is_dir())
    session = record.get("session_s") if whole else None
    return {
        "benchmark": "suite",
        "cpus": os.cpu_count(),
        "recorded": record or "no run of the whole suite recorded yet: run `make test`",
        "goals": [goal("suite: make test wall time on 2 cores (s)", session, 900, at_most=True)],
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
