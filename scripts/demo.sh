#!/usr/bin/env bash
# `make demo`: install everything, bring up a one-machine cluster, run examples/hello.yaml and show it Running.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python -c "from caravanserai.testing.docker import ensure_test_image; ensure_test_image('caravanserai/busybox:test')"
export PATH="$PWD/.venv/bin:$PATH"
cara up
caractrl apply -f examples/hello.yaml
caractrl wait project hello --for phase=Running --timeout 120s
caractrl get projects
echo
echo "The project answers on this machine: $(wget -qO- http://127.0.0.1:18080/ 2>/dev/null || curl -s http://127.0.0.1:18080/ || true)"
echo "Next: caractrl describe project hello; caractrl logs hello; cara down"
