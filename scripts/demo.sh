#!/usr/bin/env bash
# `make demo`: install everything, bring up a one-machine cluster (`cara up`, default data dir and ports), run
# examples/hello.yaml and show it Running and answering on port 18080. Safe to run again while the cluster is up:
# nothing is started twice and the project is `unchanged`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
py=.venv/bin/python
$py -c "from caravanserai.testing.docker import ensure_test_image; ensure_test_image('caravanserai/busybox:test')"
export PATH="$PWD/.venv/bin:$PATH"

cara up
echo

# hello publishes port 18080: say so plainly when something else holds it (and hello does not run yet).
if ! caractrl get project hello -o name >/dev/null 2>&1 && ! $py - <<'EOF'
import socket, sys
with socket.socket() as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", 18080))
    except OSError as exc:
        sys.exit(f"demo: port 18080, which examples/hello.yaml publishes, is in use ({exc.strerror}); free it and run make demo again")
EOF
then
  exit 1
fi

caractrl apply -f examples/hello.yaml
caractrl wait project hello --for phase=Running --timeout 120s
caractrl get projects hello
echo

# The container is up; give its web server a moment to accept connections.
$py - <<'EOF'
import time, urllib.request
url = "http://127.0.0.1:18080/"
for _ in range(50):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            print(f"{url} answers: {response.read().decode().strip()}")
            break
    except OSError:
        time.sleep(0.2)
else:
    print(f"{url} does not answer yet; see: caractrl describe project hello")
# The same page by host name, through the agent's ingress (cara up: 127.0.0.1:8081).
request = urllib.request.Request("http://127.0.0.1:8081/", headers={"Host": "web.hello.local"})
for _ in range(25):
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            print(f"web.hello.local through the ingress at 127.0.0.1:8081 answers: {response.read().decode().strip()}")
            break
    except OSError:
        time.sleep(0.2)
else:
    print("the ingress at 127.0.0.1:8081 does not answer for web.hello.local yet; see: caractrl describe project hello")
EOF

cat <<'EOF'

The live dashboard: open http://127.0.0.1:7480/ in a browser on this machine
(from another machine: ssh -L 7480:127.0.0.1:7480 THIS-HOST, then open the same address).

Next: put the CLI on your PATH, then look around:
  export PATH="$PWD/.venv/bin:$PATH"
  caractrl get nodes                  # this machine, Ready
  caractrl describe project hello     # phase, conditions, services, events
  caractrl logs hello -f              # the web server's log: one line per request (Ctrl-C to stop)
  curl -H 'Host: web.hello.local' http://127.0.0.1:8081/   # by host name, through the node's ingress
  caractrl port-forward hello/web 9090:8080                  # then http://127.0.0.1:9090/ reaches the container
  caractrl exec hello/web -- ls /tmp                         # a command inside the container
  cara status                         # the cluster's processes
  cara down                           # stop the cluster (state and running containers are kept)
EOF
