"""The agent's settings, filled from the command line by `__main__` and by tests directly."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from caravanserai.agent.ingress.httpdetails import IngressLimits
from caravanserai.agent.workload.subnets import DEFAULT_PREFIX, DEFAULT_RANGE
from caravanserai.process.tls import TLSFiles
from caravanserai.text.addresses import DEFAULT_DOCKER_HOST

DEFAULT_LISTEN = "0.0.0.0:7421"
DEFAULT_HEALTH_LISTEN = "127.0.0.1:7422"
"""Where `cara-agent` serves /healthz without flags. `AgentConfig` itself defaults to a free loopback port, so that
several agents in one process (tests) never compete for it."""
LEASE_DURATION_SECONDS = 40
DEFAULT_RECONCILE_WORKERS = 16
"""`--workers`: projects reconciled at once. Each reconcile mostly waits for Docker (a container stop waits up to
`--stop-timeout`), so a burst of arrivals or deletions is limited by this number, not by the agent's CPU."""
DEFAULT_FENCE_AFTER = 90.0 + 180.0
"""`--fence-after`: node health's default heartbeat timeout (90 s) plus its default grace period (3 min), the moment
the control plane moves a silent node's Running projects elsewhere."""


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything an agent needs to know; only `server` and `node_name` have no default."""

    server: str
    node_name: str
    tls: TLSFiles | None = None  # mutual TLS to the API server (identity `node:<name>`)
    token: str | None = None  # or a bearer token
    docker_host: str = DEFAULT_DOCKER_HOST
    heartbeat_interval: float = 10.0
    lease_duration: int = LEASE_DURATION_SECONDS
    labels: dict[str, str] = field(default_factory=dict)
    listen: str = DEFAULT_LISTEN
    allow_insecure: bool = False  # serve the log service over plain TCP on a non-loopback address
    token_file: str = ""  # bearer tokens of callers of the Agent service (`token,user[,group;group]` lines)
    # HOST:PORT of the ingress proxy, or "off". cara-agent's flag defaults to 0.0.0.0:8081; an AgentConfig made in code
    # gets a private ingress on a free loopback port.
    ingress_listen: str = "127.0.0.1:0"
    ingress_limits: IngressLimits = field(default_factory=IngressLimits)
    advertise_address: str = ""
    hostname: str = field(default_factory=socket.gethostname)
    reserved_cpu: str = "500m"
    reserved_memory: str = "512Mi"
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS
    # spare project networks kept ready (`netpool`); 0: none, each project gets `cara_<project>_<node>` made when it
    # arrives; None: as many as the node's capacity suggests (`netpool.default_pool_size`, cara-agent's default).
    # An AgentConfig made in code keeps none, so that the many agents of a test run keep Docker's work small.
    network_pool: int | None = 0
    # where project networks take their subnets from (`subnets.py`): this IPv4 range, cut into /network_prefix
    # subnets; "": Docker chooses each from its default address pools, as before the agent had its own.
    network_range: str = DEFAULT_RANGE
    network_prefix: int = DEFAULT_PREFIX
    metrics_port: int | None = None  # serve /metrics, /healthz, /readyz on every interface at this port
    health_listen: str = "127.0.0.1:0"  # otherwise here (host:port); they are always served
    stop_timeout: int = 10
    pull_timeout: float = 600.0
    throughput_interval: float = 600.0
    throughput_bytes: int = 8 * 1024 * 1024
    resync_interval: float = 300.0
    fence_after: float = DEFAULT_FENCE_AFTER  # stop this node's containers after this long without the API; 0: never
    # where the fence deadline is recorded for the node's watchdog and the agent's next run (`fencing.record`);
    # "": nowhere (the deadline lives in this process only; a restart starts the count again)
    fence_dir: str = ""
    resources: dict[str, int] = field(default_factory=dict)  # extended resources (--resource NAME=COUNT)
    data_dir: str = ""  # files of Secret and Config volumes; "" = datafiles.default_root(node_name), on tmpfs
    restic: str = "restic"  # the restic binary that backs up and restores Persistent volumes
    restic_timeout: float = 6 * 3600.0  # seconds one backup or restore may take
    restic_cache_dir: str = ""  # restic's cache directory; "": restic's default (under the agent's home)
    inventory_interval: float = 60.0  # seconds between reports of the node's images and restore rates
    allowed_host_paths: tuple[str, ...] = ()  # host paths HostPath volumes may mount (and under them); empty: any


__all__ = [
    "AgentConfig",
    "DEFAULT_FENCE_AFTER",
    "DEFAULT_HEALTH_LISTEN",
    "DEFAULT_LISTEN",
    "DEFAULT_RECONCILE_WORKERS",
    "LEASE_DURATION_SECONDS",
]
