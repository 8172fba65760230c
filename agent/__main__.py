"""`cara-agent`: command-line flags and process wiring; the agent itself is `caravanserai.agent.agent.Agent`.

    cara-agent --server 10.0.0.1:7420 --node-name node-1 --label zone=a --reserved-memory 1Gi

SIGTERM and SIGINT stop the agent gracefully: queues drain, the informer stops, the gRPC server gets a grace
period, the spare pool networks are removed. Containers keep running: stopping the agent never stops workloads.

    cara-agent --node-name node-1 --cleanup

removes the Docker networks labelled for node-1 on which no container is configured (spare pool networks, networks
of projects gone) and exits: the clean-up for a node name that will not run an agent again on this engine.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys

import structlog

from caravanserai.agent.agent import Agent
from caravanserai.agent.config import (
    DEFAULT_FENCE_AFTER,
    DEFAULT_HEALTH_LISTEN,
    DEFAULT_LISTEN,
    DEFAULT_RECONCILE_WORKERS,
    AgentConfig,
)
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.host.extended import NODE_LABEL_PREFIX, admin_label, parse_resource
from caravanserai.agent.ingress.server import add_ingress_arguments, limits_from_args
from caravanserai.agent.workload.netpool import MAX_POOL_SIZE, MIN_POOL_SIZE, POOL_PER_CORE, remove_unused_networks
from caravanserai.agent.workload.subnets import DEFAULT_PREFIX, DEFAULT_RANGE, AddressSpace, capacity
from caravanserai.client import add_client_arguments, server_address
from caravanserai.errors import CaravanseraiError
from caravanserai.process.helpformat import DefaultsHelpFormatter, flag_type
from caravanserai.process.logging import configure_logging
from caravanserai.process.shell import fatal, run_main, until_signalled
from caravanserai.process.tls import TLSFiles
from caravanserai.text.addresses import DEFAULT_DOCKER_HOST, parse_address
from caravanserai.text.durations import parse_duration
from caravanserai.text.quantity import parse_quantity
from caravanserai.text.selectors import validate_dns_subdomain

log = structlog.get_logger(__name__)

PROG = "cara-agent"


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"invalid label {text!r}: expected key=value")
    if admin_label(key):
        raise argparse.ArgumentTypeError(
            f"invalid label {text!r}: the caravanserai.io namespace is the admin's; a node sets only its own "
            f"{NODE_LABEL_PREFIX}… labels (or keys outside caravanserai.io)"
        )
    return key, value


def _ip_address(text: str) -> str:
    """An IP address (the apiserver refuses a node's InternalIP that is not one: NodeRestriction); "" for none."""
    if not text:
        return ""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address") from None


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Run this machine's assigned projects on Docker.", formatter_class=DefaultsHelpFormatter
    )
    add_client_arguments(p)  # --server, --tls-cert, --tls-key, --tls-ca, --token
    _add_node_arguments(p)
    _add_service_arguments(p)
    add_ingress_arguments(p)
    _add_capacity_arguments(p)
    _add_workload_arguments(p)
    p.add_argument("--log-level", default="info", help="debug, info, warning or error")
    return p


def _add_node_arguments(p: argparse.ArgumentParser) -> None:
    """Who this node is and how it reaches Docker and the control plane."""
    p.add_argument("--node-name", default=socket.gethostname().lower(), help="name of this node (default: hostname)")
    p.add_argument("--docker-host", default=DEFAULT_DOCKER_HOST, help="Docker Engine address (unix:// or tcp://)")
    p.add_argument("--heartbeat-interval", type=_positive, default=10.0, help="seconds between Lease renewals")
    p.add_argument(
        "--label",
        type=_label,
        action="append",
        default=[],
        help="node label key=value (repeatable), set when the Node is created; afterwards only those under "
        "node.caravanserai.io/ follow this flag, the others are the admin's",
    )
    p.add_argument(
        "--advertise-address",
        type=_ip_address,
        default="",
        help="InternalIP to report, an IP address (default: route to the server)",
    )
    p.add_argument(
        "--fence-after",
        type=flag_type(parse_duration),
        default=DEFAULT_FENCE_AFTER,
        help="stop this node's containers (keeping them) when no apiserver answered for this long (the stops "
        "start early enough to end by then, SIGKILL included); started again if still bound here on reconnect "
        "(default 270s: node health's heartbeat timeout + grace period; 0: never)",
    )
    p.add_argument(
        "--fence-dir",
        default="",
        metavar="DIR",
        help="record the fence deadline in DIR (<node>.deadline.json), for cara-fence-watchdog, which meets it "
        "when the agent cannot, and for the agent's next run, which takes it over instead of counting again "
        '(deploy/systemd: /var/lib/caravanserai/fence; "": kept in the process only)',
    )


def _add_service_arguments(p: argparse.ArgumentParser) -> None:
    """The agent's own listeners: the Agent gRPC service and its health and metrics endpoint."""
    p.add_argument("--listen", default=DEFAULT_LISTEN, help="address of the Agent gRPC service (logs)")
    p.add_argument(
        "--allow-insecure",
        action="store_true",
        help="serve the log service over plain TCP on a non-loopback --listen (default: loopback only without TLS)",
    )
    p.add_argument(
        "--token-file",
        default="",
        help="bearer tokens of callers of the Agent service (token,user[,groups] lines; admin may exec/port-forward)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve /metrics, /healthz and /readyz on every interface at this port",
    )
    p.add_argument(
        "--health-listen",
        type=flag_type(parse_address, keep_text=True),
        default=DEFAULT_HEALTH_LISTEN,
        help="where /healthz, /readyz and /metrics are served without --metrics-port (host:port)",
    )


def _add_capacity_arguments(p: argparse.ArgumentParser) -> None:
    """What this node offers: resources kept for the system and extended resources."""
    p.add_argument(
        "--reserved-cpu", type=flag_type(parse_quantity, keep_text=True), default="500m", help="cpu kept for the system"
    )
    p.add_argument(
        "--reserved-memory",
        type=flag_type(parse_quantity, keep_text=True),
        default="512Mi",
        help="memory kept for the system",
    )
    p.add_argument(
        "--resource",
        type=flag_type(parse_resource),
        action="append",
        default=[],
        metavar="NAME=COUNT",
        help="an extended resource this node offers, e.g. gpu=2 (repeatable; nvidia.com/gpu is detected)",
    )


def _add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """How projects are run: parallel reconciles, spare networks, timeouts, data files."""
    p.add_argument("--workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="projects reconciled in parallel")
    p.add_argument(
        "--network-pool",
        type=int,
        default=None,
        metavar="N",
        help="spare project networks kept ready, so that a project arriving need not wait for Docker to "
        "make one (made and removed in the background; 0: none, each project's network is made "
        f"when it arrives; default: {POOL_PER_CORE} per core, {MIN_POOL_SIZE} to {MAX_POOL_SIZE})",
    )
    p.add_argument(
        "--network-range",
        default=DEFAULT_RANGE,
        metavar="CIDR",
        help="the IPv4 range project networks take their subnets from, never one the host routes or Docker uses "
        'already ("": Docker\'s default address pools, about 30 networks per engine)',
    )
    p.add_argument(
        "--network-prefix",
        type=int,
        default=DEFAULT_PREFIX,
        metavar="BITS",
        help=f"the size of each project network's subnet within --network-range (/{DEFAULT_PREFIX}: "
        f"{capacity(DEFAULT_PREFIX)} containers; a bigger project gets a bigger one)",
    )
    p.add_argument(
        "--cleanup",
        action="store_true",
        help="remove the Docker networks labelled for --node-name on which no container is configured (spare "
        "pool networks, networks of projects gone), then exit; for a node whose agent will not run again here",
    )
    p.add_argument(
        "--stop-timeout",
        type=int,
        default=10,
        help="seconds a container gets to stop before SIGKILL (a service's stopGracePeriod wins)",
    )
    p.add_argument(
        "--allowed-host-paths",
        type=flag_type(parse_host_paths),
        default=(),
        metavar="PATH[,PATH...]",
        help="host paths HostPath volumes may mount (each path or under it); projects with others are kept off "
        "this node and refused by it (default: any path)",
    )
    p.add_argument("--pull-timeout", type=_positive, default=600.0, help="seconds an image pull may take")
    p.add_argument(
        "--data-dir",
        default="",
        help="where files of Secret and Config volumes are written (default: a tmpfs directory under "
        "/dev/shm/caravanserai-agent/)",
    )
    p.add_argument("--restic", default="restic", help="the restic binary that backs up and restores volumes")
    p.add_argument(
        "--restic-timeout", type=_positive, default=6 * 3600.0, help="seconds one volume backup or restore may take"
    )
    p.add_argument("--restic-cache-dir", default="", help="restic's cache directory (default: restic's own)")


def parse_host_paths(text: str) -> tuple[str, ...]:
    """`/srv,/data` → ("/srv", "/data"); each must be absolute (ValueError otherwise)."""
    paths = tuple(part.strip() for part in text.split(",") if part.strip())
    for path in paths:
        if not path.startswith("/"):
            raise ValueError(f"host path {path!r} must be absolute (start with '/')")
    return paths


def config_from_args(args: argparse.Namespace) -> AgentConfig:
    """The AgentConfig for parsed flags; raises ValueError for an invalid node name or worker count."""
    problem = validate_dns_subdomain(args.node_name)
    if problem:
        raise ValueError(f"invalid --node-name {args.node_name!r}: {problem}")
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    if args.network_pool is not None and args.network_pool < 0:
        raise ValueError("--network-pool must be 0 or more")
    if args.network_range:
        try:
            AddressSpace.parse(args.network_range, args.network_prefix)
        except ValueError as exc:
            raise ValueError(f"--network-range/--network-prefix: {exc}") from None
    tls = TLSFiles(cert=args.tls_cert, key=args.tls_key, ca=args.tls_ca)
    return AgentConfig(
        server=server_address(args.server),
        node_name=args.node_name,
        tls=tls if tls.enabled else None,
        token=args.token or os.environ.get("CARA_TOKEN") or None,
        docker_host=args.docker_host,
        heartbeat_interval=args.heartbeat_interval,
        labels=dict(args.label),
        listen=args.listen,
        allow_insecure=args.allow_insecure,
        token_file=args.token_file,
        ingress_listen=args.ingress_listen,
        ingress_limits=limits_from_args(args),
        advertise_address=args.advertise_address,
        reserved_cpu=args.reserved_cpu,
        reserved_memory=args.reserved_memory,
        reconcile_workers=args.workers,
        network_pool=args.network_pool,
        network_range=args.network_range,
        network_prefix=args.network_prefix,
        metrics_port=args.metrics_port,
        health_listen=args.health_listen,
        stop_timeout=args.stop_timeout,
        allowed_host_paths=args.allowed_host_paths,
        pull_timeout=args.pull_timeout,
        fence_after=args.fence_after,
        fence_dir=args.fence_dir,
        resources=dict(args.resource),
        data_dir=args.data_dir,
        restic=args.restic,
        restic_timeout=args.restic_timeout,
        restic_cache_dir=args.restic_cache_dir,
    )


async def run(config: AgentConfig) -> None:
    """Run the agent until SIGTERM/SIGINT (then stop it cleanly)."""
    agent = Agent(config)
    await until_signalled(agent.run(), stop=agent.stop)
    log.info("agent stopped", node=config.node_name)


async def cleanup(node: str, docker_host: str) -> None:
    """`--cleanup`: remove the unused networks of `node` on the engine at `docker_host`, saying which."""
    async with DockerRuntime.connect(docker_host) as docker:
        removed = await remove_unused_networks(docker, node)
    for name in removed:
        print(f"network {name} removed")
    print(f"{len(removed)} network(s) of node {node} removed")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging(args.log_level)
    if args.cleanup:
        run_main(PROG, lambda: cleanup(args.node_name, args.docker_host), errors=(CaravanseraiError,))
        return 0
    try:
        config = config_from_args(args)
    except ValueError as exc:
        fatal(PROG, exc, code=2)  # a usage error, as argparse's own
    run_main(PROG, lambda: run(config), errors=())  # a running agent's failures keep their traceback
    return 0


__all__ = ["cleanup", "config_from_args", "main", "parser", "run"]

if __name__ == "__main__":
    sys.exit(main())
