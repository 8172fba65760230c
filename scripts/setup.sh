#!/usr/bin/env bash
# Install what Caravanserai needs on a Debian/Ubuntu machine, skipping what is already there:
#   apt: etcd-server (etcd), docker.io (Docker Engine), busybox-static (test image), iproute2/iptables/util-linux
#   (the fleet tier's namespaces), wrk (the ingress benchmark), docker-registry and apache2-utils (the private
#   registry of the image-pull tests, with htpasswd), restic (the agent's volume backups) and rclone (`rclone serve
#   restic`: the REST repository of the tests and benchmarks); with --browser also chromium and chromium-driver (the
#   dashboard's browser tests); a .venv with the package.
# Then make sure dockerd runs (removing a stale pid file left by a killed daemon).
# Usage: scripts/setup.sh [--no-docker] [--browser]
set -euo pipefail
cd "$(dirname "$0")/.."

want_docker=1
want_browser=0
for arg in "$@"; do
  case "$arg" in
    --no-docker) want_docker=0 ;;
    --browser) want_browser=1 ;;
    *) echo "setup: unknown argument $arg" >&2; exit 2 ;;
  esac
done

sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)

missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# the fleet tier (tests/fleet): network namespaces, a bridge, iptables, nsenter
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
# the load generator of bench/bench_ingress.py
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
# volume backups: the agent runs restic; tests and bench/bench_backup.py serve a REST repository with rclone
command -v restic >/dev/null 2>&1 || missing+=(restic)
command -v rclone >/dev/null 2>&1 || missing+=(rclone)
if [ "$want_docker" = 1 ]; then
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
  # tests/e2e/test_image_pull.py: a local Distribution registry with htpasswd (bcrypt) basic auth
  command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
  command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
fi
if [ "$want_browser" = 1 ]; then
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  [ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
stamp=.venv/.installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  echo "setup: pip install -e '.[test]'"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi

if [ "$want_docker" = 1 ]; then
  scripts/start-dockerd.sh
fi
