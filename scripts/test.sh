#!/usr/bin/env bash
# The one test command (`make test`): install what is missing (with Chromium for the dashboard tests), start
# dockerd, check generated code is fresh, check formatting and lint (ruff), check the import layering contracts, type-check (mypy, configured in pyproject.toml), run the whole pytest
# suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --browser
echo "== generated code"
.venv/bin/python proto/generate.py --check
echo "== format and lint (ruff, configured in pyproject.toml)"
.venv/bin/ruff format --check --quiet .
.venv/bin/ruff check --quiet .
echo "== import layering"
.venv/bin/lint-imports
echo "== types"
.venv/bin/mypy
echo "== tests"
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
