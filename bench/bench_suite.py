"""The test suite's wall time per tier, as the last `make test` (or any pytest run of the whole suite) recorded it
in test-artifacts/tier-times.json (written by tests/conftest.py at the end of every run). Prints JSON.

    .venv/bin/python bench/bench_suite.py [--run]

When no run of the whole suite has left its figures (a fresh clone), or with `--run`, it runs `make test`'s
command (scripts/test.sh) first — many minutes — and reports that run, with the whole command's wall time.
The record says when the figures were taken and under which load.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

from benchlib import goal

RECORD = pathlib.Path(__file__).resolve().parent.parent / "test-artifacts" / "tier-times.json"
TIERS = ("unit", "integration", "e2e", "faults", "security", "fleet")


ROOT = RECORD.parent.parent


def recorded() -> dict[str, Any] | None:
    """The last run's record, if that run was of the whole suite (every tier)."""
    try:
        record: dict[str, Any] = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return None
    tiers = record.get("tiers_s", {})
    whole = all(tier in tiers for tier in TIERS if (ROOT / "tests" / tier).is_dir())
    return record if whole else None


def run_suite() -> dict[str, Any]:
    """Run `make test`'s command; its output goes to this script's stderr. The command's wall time and status."""
    started = time.monotonic()
    done = subprocess.run(["scripts/test.sh"], cwd=ROOT, stdout=sys.stderr, check=False)
    return {
        "command": "scripts/test.sh",
        "wall_s": round(time.monotonic() - started, 1),
        "exit_status": done.returncode,
    }


def main(opts: argparse.Namespace) -> dict[str, Any]:
    record = None if opts.run else recorded()
    ran = None
    if record is None:
        ran = run_suite()
        record = recorded()
    session = record.get("session_s") if record else None
    return {
        "benchmark": "suite",
        "cpus": os.cpu_count(),
        "ran_now": ran,
        "recorded": record or "the run did not record every tier",
        "goals": [goal("suite: make test wall time on 2 cores (s)", session, 900, at_most=True)],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run the suite now even when a run is recorded")
    print(json.dumps(main(parser.parse_args()), indent=2))
