#!/usr/bin/env bash
# Start dockerd when no Docker engine answers. A dockerd killed without cleanup leaves /var/run/docker.pid
# behind and the next one refuses to start ("pid file found"): remove it when no dockerd process runs.
set -euo pipefail
if docker info >/dev/null 2>&1; then
  exit 0
fi
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
if ! pgrep -x dockerd >/dev/null 2>&1; then
  "${sudo_cmd[@]}" rm -f /var/run/docker.pid
  for sock in /var/run/docker/containerd/containerd.pid; do "${sudo_cmd[@]}" rm -f "$sock"; done
  log=${DOCKERD_LOG:-/tmp/caravanserai-dockerd.log}
  echo "setup: starting dockerd (log: $log)"
  "${sudo_cmd[@]}" sh -c "nohup dockerd --host unix:///var/run/docker.sock >'$log' 2>&1 &"
fi
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "setup: dockerd did not come up; last log lines:" >&2
tail -20 "${DOCKERD_LOG:-/tmp/caravanserai-dockerd.log}" >&2 || true
exit 1
