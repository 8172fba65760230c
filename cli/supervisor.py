"""The process supervisor behind `cara up`: runs etcd, the apiserver, the controllers and an agent, restarting any
that dies, until SIGTERM.

Guarantees:

* Children start in dependency order (etcd, apiserver, controller manager, agent) and each one's output goes to
  `<data-dir>/logs/<name>.log`; the supervisor's own notes go to `<data-dir>/logs/supervisor.log`.
* A child that exits is restarted with backoff (1 s doubling to 30 s, reset after 60 s of good health).
* On SIGTERM or SIGINT every child gets SIGTERM in reverse order, then SIGKILL after 10 s (the agent, which removes
  its spare networks on the way out: 45 s); the supervisor exits
  only when all are gone, so `cara down` leaves no process behind.
* `<data-dir>/cara.json` describes the running cluster (pids, restarts, addresses) while the supervisor runs.
* The supervisor and every child carry `CARAVANSERAI_CLUSTER_DIR=<data-dir>` in their environment, so
  `cluster_processes` finds every process of a cluster, even orphans of a supervisor that was killed.

Stopping the agent never stops containers: the workloads of the node keep running while the control plane is down,
and the next agent adopts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from caravanserai.backoff import Backoff
from caravanserai.clock import Clock, SystemClock
from caravanserai.process.etcdmember import ETCD_MEMBER_FLAGS
from caravanserai.process.shell import keep_restarting, until_signalled
from caravanserai.process.subprocesses import stop_process
from caravanserai.process.tls import TLSFiles

STATE_FILE = "cara.json"
"""Name of the state file in the data directory, present while the supervisor runs."""

CLUSTER_ENV = "CARAVANSERAI_CLUSTER_DIR"
"""Environment variable naming the data directory, set on the supervisor and every process it starts."""

SUPERVISOR_MODULE = "caravanserai.cli.supervisor"
"""The module the supervisor runs as (`python -m …`)."""

STOP_GRACE = 10.0
"""Seconds a child gets between SIGTERM and SIGKILL (the agent: `AGENT_STOP_GRACE`)."""
AGENT_STOP_GRACE = 45.0
"""Seconds the agent gets: on a clean stop it removes its spare networks, which dockerd does one at a time
(`agent.RELEASE_TIMEOUT` + `RELEASE_PER_NETWORK` × the pool, at most 64 networks: 37 s)."""

# A child that exits is restarted after 1 s, doubling to 30 s; a run longer than HEALTHY_RUN seconds starts again
# from 1 s. No jitter: the children of one supervisor do not crowd a shared server.
RESTART_BACKOFF = Backoff(initial=1.0, cap=30.0, jitter=0.0, reset_after=None)
HEALTHY_RUN = 60.0


@dataclass
class Child:
    """One supervised process."""

    name: str
    argv: list[str]
    pid: int = 0
    restarts: int = 0
    proc: asyncio.subprocess.Process | None = field(default=None, repr=False)


DASHBOARD_TOKEN_FILE = "dashboard-token"
"""The dashboard's access token in the data directory (0600), made afresh by each `cara up` that starts a cluster."""


@dataclass
class ClusterSpec:
    """What `cara up` asked for (stored in the state file as `spec`)."""

    data_dir: str
    api_listen: str
    etcd_client_port: int
    etcd_peer_port: int
    agent: bool
    agent_listen: str
    node_name: str
    etcd_binary: str = "etcd"
    docker_host: str = ""
    metrics_listen: str = "127.0.0.1:7423"  # the apiserver's /metrics, /healthz, /readyz
    agent_health_listen: str = "127.0.0.1:7422"  # the agent's /healthz
    dashboard: bool = True
    dashboard_listen: str = "127.0.0.1:7480"
    ingress_listen: str = "127.0.0.1:8081"  # the agent's ingress proxy, or "off"
    controller_flags: list[str] = field(default_factory=list)  # from --config/--set (`clusterconfig`), checked
    agent_flags: list[str] = field(default_factory=list)
    insecure: bool = False  # --insecure: no TLS, no client certificates, Secrets in the clear (before: the default)

    def admin_tls(self) -> TLSFiles | None:
        """The admin's certificate, key and CA in the data directory (None when insecure)."""
        if self.insecure:
            return None
        pki = Path(self.data_dir) / "pki"
        return TLSFiles(cert=str(pki / "admin.crt"), key=str(pki / "admin.key"), ca=str(pki / "ca.crt"))

    def tls_flags(self, identity: str, *, prefix: str = "--tls") -> list[str]:
        """`--tls-cert/--tls-key/--tls-ca` of `identity` from the data directory's pki (none when insecure)."""
        if self.insecure:
            return []
        name = identity.replace(":", "-")
        pki = Path(self.data_dir) / "pki"
        ca = "etcd-ca.crt" if identity == "apiserver-etcd-client" else "ca.crt"
        if prefix == "--etcd":
            return [
                f"--etcd-certfile={pki / name}.crt",
                f"--etcd-keyfile={pki / name}.key",
                f"--etcd-cafile={pki / ca}",
            ]
        return [f"{prefix}-cert={pki / name}.crt", f"{prefix}-key={pki / name}.key", f"{prefix}-ca={pki / ca}"]

    def children(self) -> list[Child]:
        """The processes of the cluster, in start order."""
        result = [self._etcd(), self._apiserver(), self._controller_manager()]
        if self.agent:
            result.append(self._agent())
        if self.dashboard:
            result.append(self._dashboard())
        return result

    @property
    def etcd_url(self) -> str:
        """etcd's client URL (https, client certificates required, unless insecure)."""
        return f"{'http' if self.insecure else 'https'}://127.0.0.1:{self.etcd_client_port}"

    def _etcd_tls(self) -> list[str]:
        """etcd serves clients and peers over TLS and admits only certificates of the etcd CA (the apiserver's)."""
        if self.insecure:
            return []
        pki = Path(self.data_dir) / "pki"
        return [
            f"--cert-file={pki / 'etcd.crt'}",
            f"--key-file={pki / 'etcd.key'}",
            f"--trusted-ca-file={pki / 'etcd-ca.crt'}",
            "--client-cert-auth",
        ]

    def _etcd(self) -> Child:
        peer_url = f"http://127.0.0.1:{self.etcd_peer_port}"
        return Child(
            "etcd",
            [
                self.etcd_binary,
                "--name",
                "cara",
                "--data-dir",
                str(Path(self.data_dir) / "etcd"),
                "--listen-client-urls",
                self.etcd_url,
                "--advertise-client-urls",
                self.etcd_url,
                "--listen-peer-urls",
                peer_url,
                "--initial-advertise-peer-urls",
                peer_url,
                "--initial-cluster",
                f"cara={peer_url}",
                *ETCD_MEMBER_FLAGS,
                *self._etcd_tls(),
            ],
        )

    def _apiserver(self) -> Child:
        return Child(
            "apiserver",
            [
                sys.executable,
                "-m",
                "caravanserai.apiserver",
                "--etcd-endpoints",
                self.etcd_url,
                "--listen",
                self.api_listen,
                "--metrics-listen",
                self.metrics_listen,
                *self.tls_flags("apiserver-etcd-client", prefix="--etcd"),
                *self.tls_flags("apiserver"),
                *(
                    []
                    if self.insecure
                    else [f"--encryption-key-file={Path(self.data_dir) / 'pki' / 'encryption.keys'}"]
                ),
            ],
        )

    def _controller_manager(self) -> Child:
        return Child(
            "controller-manager",
            [
                sys.executable,
                "-m",
                "caravanserai.controllers.manager",
                "--server",
                self.api_listen,
                "--no-leader-elect",
                "--metrics-port",
                "-1",
                *self.tls_flags("controller:manager"),
                *self.controller_flags,
            ],
        )

    def _agent(self) -> Child:
        argv = [
            sys.executable,
            "-m",
            "caravanserai.agent",
            "--server",
            self.api_listen,
            "--node-name",
            self.node_name,
            "--listen",
            self.agent_listen,
            "--health-listen",
            self.agent_health_listen,
            "--ingress-listen",
            self.ingress_listen,
            *self.tls_flags(f"node:{self.node_name}"),
        ]
        if self.docker_host:
            argv += ["--docker-host", self.docker_host]
        return Child("agent", argv + self.agent_flags)

    def _dashboard(self) -> Child:
        return Child(
            "dashboard",
            [
                sys.executable,
                "-m",
                "caravanserai.dashboard",
                "--server",
                self.api_listen,
                "--listen",
                self.dashboard_listen,
                "--access-token-file",
                str(Path(self.data_dir) / DASHBOARD_TOKEN_FILE),
                *self.tls_flags("admin"),  # the local admin's own tool: it acts (and reads logs) as admin
            ],
        )


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def process_cmdline(pid: int) -> list[str]:
    """The command line of process `pid` ([] when it is gone or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def cluster_processes(data_dir: Path) -> list[int]:
    """Pids of the live processes of the cluster whose data directory is `data_dir` (Linux /proc; [] elsewhere).

    A process belongs to the cluster when its environment carries `CARAVANSERAI_CLUSTER_DIR=<data_dir>`; the caller
    itself and its parent are never listed."""
    entry = f"{CLUSTER_ENV}={data_dir}".encode()
    mine = {os.getpid(), os.getppid()}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    pids = [int(name) for name in names if name.isdigit() and int(name) not in mine]
    return sorted(pid for pid in pids if _environ_has(pid, entry) and process_alive(pid))


def is_supervisor(pid: int) -> bool:
    """Whether `pid` is a live supervisor process (not another process that reused the number)."""
    if not process_alive(pid):
        return False
    cmdline = process_cmdline(pid)
    return not cmdline or SUPERVISOR_MODULE in cmdline  # unreadable /proc: trust the pid


def cluster_env(data_dir: Path) -> dict[str, str]:
    """The environment of the supervisor and its children: ours plus the cluster marker."""
    return {**os.environ, CLUSTER_ENV: str(data_dir)}


class Supervisor:
    """Starts the children of a `ClusterSpec`, keeps them running and stops them all on SIGTERM/SIGINT."""

    def __init__(self, spec: ClusterSpec, *, clock: Clock | None = None) -> None:
        self.spec = spec
        self.clock: Clock = clock or SystemClock()
        self.data = Path(spec.data_dir)
        self.children = spec.children()
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Run until SIGTERM or SIGINT, then stop every child and remove the state file."""
        (self.data / "logs").mkdir(parents=True, exist_ok=True)
        await until_signalled(self._supervise(), stop=self._stopping.set)  # a second signal changes nothing

    async def _supervise(self) -> None:
        self._log(f"supervisor {os.getpid()} starting {', '.join(c.name for c in self.children)}")
        tasks: list[asyncio.Task[None]] = []
        for child in self.children:
            if self._stopping.is_set():
                break
            tasks.append(asyncio.create_task(self._keep_running(child)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), 1.0 if child.name == "etcd" else 0.3)
        await self._stopping.wait()
        self._log("stopping")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for child in reversed(self.children):
            await self._stop(child)
        self._state_path().unlink(missing_ok=True)
        self._log("stopped")

    async def _keep_running(self, child: Child) -> None:
        async def life() -> int:
            await self._start(child)
            assert child.proc is not None
            return await child.proc.wait()

        def exited(code: int, delay: float) -> None:
            child.restarts += 1
            self._log(f"{child.name} (pid {child.pid}) exited with {code}; restarting in {delay:.0f}s")

        await keep_restarting(life, policy=RESTART_BACKOFF, clock=self.clock, on_exit=exited, healthy_run=HEALTHY_RUN)

    async def _start(self, child: Child) -> None:
        log = open(self.data / "logs" / f"{child.name}.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            child.proc = await asyncio.create_subprocess_exec(
                *child.argv,
                stdout=log,
                stderr=log,
                stdin=asyncio.subprocess.DEVNULL,
                env=cluster_env(self.data),
            )
        finally:
            log.close()
        child.pid = child.proc.pid
        self._log(f"{child.name} started (pid {child.pid})")
        self._write_state()

    async def _stop(self, child: Child) -> None:
        grace = AGENT_STOP_GRACE if child.name == "agent" else STOP_GRACE
        if await stop_process(child.proc, grace=grace):
            self._log(f"{child.name} (pid {child.pid}) ignored SIGTERM for {grace:g}s; killed it")

    def _state_path(self) -> Path:
        return self.data / STATE_FILE

    def _write_state(self) -> None:
        state = {
            "supervisor_pid": os.getpid(),
            "spec": asdict(self.spec),
            "children": {c.name: {"pid": c.pid, "restarts": c.restarts, "argv": c.argv} for c in self.children},
        }
        tmp = self._state_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self._state_path())

    def _log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with open(self.data / "logs" / "supervisor.log", "a") as f:
            f.write(f"{stamp} {message}\n")


def main() -> None:
    """Entry point: `python -m caravanserai.cli.supervisor '<ClusterSpec as JSON>'`."""
    spec = ClusterSpec(**json.loads(sys.argv[1]))
    asyncio.run(Supervisor(spec).run())


if __name__ == "__main__":
    main()
