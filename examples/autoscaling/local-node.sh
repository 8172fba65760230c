#!/bin/sh
# An exec provider for cara-autoscaler on one machine: each "node" is a cara-agent process with its own node name
# and loopback ports, driving this machine's Docker engine.
#
#   local-node.sh create   start an agent named $CARA_NODE_NAME (idempotent: a running one is left alone)
#   local-node.sh delete   stop it and remove what it left in Docker (idempotent)
#   local-node.sh list     print the names of the agents this script runs, one per line
#
# The autoscaler sets CARA_NODE_NAME, CARA_NODE_LABELS (k=v,...) and CARA_NODE_RESOURCES (NAME=COUNT,...); the
# group's spec.provider.exec.env sets CARA_SERVER (the apiserver) and CARA_LOCAL_NODES (a directory for the
# agents' pid and log files), and optionally CARA_AGENT (the agent command, default cara-agent) and
# CARA_AGENT_ARGS (more flags).
set -eu
dir="${CARA_LOCAL_NODES:?set CARA_LOCAL_NODES to a directory for the agents pid and log files}"
mkdir -p "$dir"

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

case "${1:-}" in
create)
    pidfile="$dir/$CARA_NODE_NAME.pid"
    if running "$pidfile"; then exit 0; fi
    set -- --server "${CARA_SERVER:?set CARA_SERVER}" --node-name "$CARA_NODE_NAME" \
        --listen 127.0.0.1:0 --health-listen 127.0.0.1:0 --ingress-listen off --network-pool 0
    old_ifs=$IFS; IFS=,
    for label in ${CARA_NODE_LABELS:-}; do
        case "$label" in
        caravanserai.io/*) ;;  # the admin's namespace: the autoscaler sets these once the node has registered
        *) set -- "$@" --label "$label" ;;
        esac
    done
    for resource in ${CARA_NODE_RESOURCES:-}; do set -- "$@" --resource "$resource"; done
    IFS=$old_ifs
    # shellcheck disable=SC2086  # CARA_AGENT and CARA_AGENT_ARGS are word lists
    nohup ${CARA_AGENT:-cara-agent} "$@" ${CARA_AGENT_ARGS:-} >"$dir/$CARA_NODE_NAME.log" 2>&1 &
    echo $! >"$pidfile"
    ;;
delete)
    pidfile="$dir/$CARA_NODE_NAME.pid"
    if running "$pidfile"; then
        pid=$(cat "$pidfile")
        kill "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    filter="label=caravanserai.io/node=$CARA_NODE_NAME"
    ids=$(docker container ls -aq --filter "$filter" 2>/dev/null || true)
    [ -z "$ids" ] || docker container rm -f $ids >/dev/null 2>&1 || true
    ids=$(docker network ls -q --filter "$filter" 2>/dev/null || true)
    [ -z "$ids" ] || docker network rm $ids >/dev/null 2>&1 || true
    ids=$(docker volume ls -q --filter "$filter" 2>/dev/null || true)
    [ -z "$ids" ] || docker volume rm -f $ids >/dev/null 2>&1 || true
    ;;
list)
    for pidfile in "$dir"/*.pid; do
        [ -e "$pidfile" ] || continue
        if running "$pidfile"; then basename "$pidfile" .pid; fi
    done
    ;;
*)
    echo "usage: $0 create|delete|list" >&2
    exit 2
    ;;
esac
