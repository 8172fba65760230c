"""A whole Caravanserai fleet on one machine that behaves like several: `async with Fleet() as fleet:`.

Layout (defaults; `FleetConfig` changes the counts and timings):

    root namespace: the test process, bridge cfl<run>br 10.213.N.1/24, unreachable route for 10.213.N.0/24
    cp0 10.213.N.10   etcd m0, cara-apiserver
    cp1 10.213.N.11   etcd m1, cara-apiserver, cara-controller-manager (replica a)
    cp2 10.213.N.12   etcd m2,                 cara-controller-manager (replica b)
    w0… 10.213.N.13…  dockerd, cara-agent (node w0, …), cara-fence-watchdog

Every connection uses mutual TLS with certificates made by `deploy/certs.sh` (identities `apiserver`, `admin`,
`controller:manager`, `node:<host>` from the fleet CA; `etcd` and `apiserver-etcd-client` from the etcd CA, so only
the apiservers reach etcd). Clients (the agents, the controllers, `client()`, `caractrl()`) are
given both apiservers (`--server a:7420,b:7420`). The controller managers elect a leader on short timings, the
node-health timings are `FleetConfig.heartbeat_timeout`/`grace_period`. Each agent records its fence deadline in
`<workdir>/<host>/fence` (`--fence-dir`), where the host's `cara-fence-watchdog` (`fleet.watchdogs`, unless
`FleetConfig.watchdog` is off) meets it when the agent cannot, as deploy/systemd has it.

Faults: `cut(host)`/`heal(host)` (a real partition, see `netns`), `kill`/`stop`/`start` of any `HostProcess`
(`fleet.apiservers`, `fleet.controllers`, `fleet.agents`, `fleet.watchdogs`, `fleet.etcd.members[i].process`,
`fleet.dockers`).

`stop()` (also on errors in `start()`) removes every process, container, mount, namespace, link, rule and route
of the run (`cleanup.remove_run`); runs left by a killed test process are removed when the next one starts.
Requires root; `netns.check_available()` raises `NamespacesUnavailable` with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.docker import DEFAULT_IMAGE, ensure_test_image
from support.certfiles import tls_for
from support.fleet import cleanup
from support.fleet.dockerd import HostDocker
from support.fleet.etcdcluster import EtcdCluster
from support.fleet.netns import Host, Network, check_available, free_subnet
from support.fleet.process import HostProcess

API_PORT = 7420
AGENT_PORT = 7421

CERTS_SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "certs.sh"
"""The repository's `deploy/certs.sh`: the harness runs from a source checkout, beside it."""
ETCD_CA_IDENTITIES = frozenset({"etcd", "apiserver-etcd-client"})
"""The identities `deploy/certs.sh` makes from the separate etcd CA (`etcd-ca.crt`), which etcd alone trusts."""


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """Sizes and timings of a fleet. Durations in seconds."""

    workers: int = 3
    apiservers: int = 2  # on the first control hosts
    controller_replicas: int = 2  # on the last control hosts
    heartbeat_interval: float = 1.0
    heartbeat_timeout: float = 5.0
    grace_period: float = 5.0
    fence_after: float | None = None  # the agents' --fence-after; None: heartbeat_timeout + grace_period
    watchdog: bool = True  # run cara-fence-watchdog beside each agent
    image: str = DEFAULT_IMAGE
    agent_args: tuple[str, ...] = ()
    controller_args: tuple[str, ...] = ()


def _python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def _seconds(value: float) -> str:
    return f"{int(value * 1000)}ms"


@dataclass
class Fleet:
    """See the module docstring."""

    config: FleetConfig = field(default_factory=FleetConfig)
    run_id: str = field(default_factory=lambda: secrets.token_hex(2))
    workdir: Path = field(init=False)
    network: Network = field(init=False)
    etcd: EtcdCluster = field(init=False)
    dockers: dict[str, HostDocker] = field(default_factory=dict)
    apiservers: list[HostProcess] = field(default_factory=list)
    controllers: list[HostProcess] = field(default_factory=list)
    agents: dict[str, HostProcess] = field(default_factory=dict)
    watchdogs: dict[str, HostProcess] = field(default_factory=dict)

    # ---- addresses and identities ----------------------------------------------------------------------------

    @property
    def control_hosts(self) -> list[Host]:
        return [h for h in self.network.hosts.values() if h.name.startswith("cp")]

    @property
    def workers(self) -> list[Host]:
        return [h for h in self.network.hosts.values() if h.name.startswith("w")]

    @property
    def server(self) -> str:
        """The `--server` list naming every apiserver."""
        return ",".join(f"{h.address}:{API_PORT}" for h in self.control_hosts[: self.config.apiservers])

    def tls(self, identity: str) -> TLSFiles:
        ca = "etcd-ca.crt" if identity in ETCD_CA_IDENTITIES else "ca.crt"
        return tls_for(self.workdir / "certs", identity, ca=ca)

    def _tls_args(self, identity: str) -> list[str]:
        tls = self.tls(identity)
        return [f"--tls-cert={tls.cert}", f"--tls-key={tls.key}", f"--tls-ca={tls.ca}"]

    def client(self, identity: str = "admin", *, timeout: float = 30.0, retry_timeout: float = 30.0) -> Client:
        """A client of every apiserver with `identity`'s certificate."""
        return Client(self.server, tls=self.tls(identity), timeout=timeout, retry_timeout=retry_timeout)

    def caractrl_argv(self, *args: str) -> list[str]:
        """The command line of `caractrl ARGS…` as an admin against every apiserver."""
        return _python("caravanserai.cli", "--server", self.server, *self._tls_args("admin"), *args)

    def caractrl(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run `caractrl` as an admin against every apiserver (blocking); the completed process."""
        argv = self.caractrl_argv(*args)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    # ---- lifecycle --------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Make the network, certificates, etcd, apiservers, controllers, engines and agents; return when every
        node is Ready. On any failure everything made so far is removed."""
        check_available()
        cleanup.remove_leftovers()
        subnet = free_subnet(self.run_id)
        self.workdir = cleanup.claim_run(self.run_id, str(subnet))
        try:
            self.network = Network.create(self.run_id, subnet)
            for index in range(3):
                self.network.add_host(f"cp{index}")
            for index in range(self.config.workers):
                self.network.add_host(f"w{index}")
            await asyncio.to_thread(self._make_certs)
            self.etcd = EtcdCluster(
                self.control_hosts,
                self.workdir / "etcd",
                tls=self.tls("etcd"),
                client_tls=self.tls("apiserver-etcd-client"),
            )
            (self.workdir / "etcd").mkdir()
            image = await asyncio.to_thread(ensure_test_image, self.config.image)
            await asyncio.gather(self.etcd.start(), self._start_engines(image))
            await self._start_control_plane()
            await self._start_watchdogs()
            await self._start_agents()
            await self.wait_nodes_ready()
        except BaseException:
            await self.stop()
            raise

    def _make_certs(self) -> None:
        script = str(CERTS_SCRIPT)
        certs = self.workdir / "certs"
        control = ",".join(h.address for h in self.control_hosts)
        env = {**os.environ, "APISERVER_HOSTS": control, "ETCD_HOSTS": control}
        names = ["apiserver", "etcd", "apiserver-etcd-client", "admin", "controller:manager"]
        subprocess.run(["bash", script, str(certs), *names], env=env, check=True, capture_output=True)
        for host in self.workers:
            env = {**os.environ, "NODE_HOSTS": host.address}
            subprocess.run(["bash", script, str(certs), f"node:{host.name}"], env=env, check=True, capture_output=True)

    async def _start_engines(self, image: str) -> None:
        async def one(host: Host) -> None:
            docker = HostDocker(host, self.workdir / host.name, cgroup_parent=host.netns)
            self.dockers[host.name] = docker
            await docker.start()
            await docker.load_image(image)

        await asyncio.gather(*(one(h) for h in self.workers))

    def _log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    async def _start_control_plane(self) -> None:
        tls = self.tls("apiserver-etcd-client")
        etcd_tls = [f"--etcd-cafile={tls.ca}", f"--etcd-certfile={tls.cert}", f"--etcd-keyfile={tls.key}"]
        for host in self.control_hosts[: self.config.apiservers]:
            argv = _python(
                "caravanserai.apiserver", "--etcd-endpoints", ",".join(self.etcd.endpoints), *etcd_tls,
                "--listen", f"{host.address}:{API_PORT}", *self._tls_args("apiserver"),
                "--bookmark-interval", "1", "--shutdown-delay", "1", "--shutdown-grace", "2",
                "--log-level", "info",
            )  # fmt: skip
            name = f"apiserver-{host.name}"
            self.apiservers.append(HostProcess(name, argv, log_path=self._log(name), netns=host.netns))
        await asyncio.gather(*(p.start() for p in self.apiservers))
        await self.wait_serving()
        for host in self.control_hosts[-self.config.controller_replicas :]:
            name = f"controllers-{host.name}"
            argv = self._controller_argv(host)
            self.controllers.append(HostProcess(name, argv, log_path=self._log(name), netns=host.netns))
        await asyncio.gather(*(p.start() for p in self.controllers))

    def _controller_argv(self, host: Host) -> list[str]:
        cfg = self.config
        return _python(
            "caravanserai.controllers.manager", "--server", self.server, *self._tls_args("controller:manager"),
            "--leader-elect-identity", host.name,
            "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
            "--leader-elect-retry-period", "500ms",
            "--heartbeat-timeout", _seconds(cfg.heartbeat_timeout), "--grace-period", _seconds(cfg.grace_period),
            "--startup-grace-period", "1s", "--terminated-delay", "1s", "--metrics-port", "-1",
            "--log-format", "console", *cfg.controller_args,
        )  # fmt: skip

    def agent_argv(self, host: Host, *extra: str) -> list[str]:
        """The agent's command line on `host`, with `extra` flags after the fleet's own."""
        cfg = self.config
        fence_after = cfg.heartbeat_timeout + cfg.grace_period if cfg.fence_after is None else cfg.fence_after
        return _python(
            "caravanserai.agent", "--server", self.server, *self._tls_args(f"node:{host.name}"),
            "--node-name", host.name, "--docker-host", self.dockers[host.name].url,
            "--heartbeat-interval", str(cfg.heartbeat_interval), "--listen", f"{host.address}:{AGENT_PORT}",
            "--stop-timeout", "1", "--fence-after", _seconds(fence_after), "--fence-dir", str(self.fence_dir(host)),
            "--network-pool", "2",  # not ten per core: every (re)start fills the pool and every stop empties it
            "--log-level", "info", *cfg.agent_args, *extra,
        )  # fmt: skip

    def fence_dir(self, host: Host | str) -> Path:
        """Where the agent of `host` records its fence deadline for the host's watchdog."""
        return self.workdir / self._host(host).name / "fence"

    async def _start_watchdogs(self) -> None:
        if not self.config.watchdog:
            return
        for host in self.workers:
            name = f"watchdog-{host.name}"
            argv = _python(
                "caravanserai.agent.fencing", "--node-name", host.name, "--fence-dir", str(self.fence_dir(host)),
                "--docker-host", self.dockers[host.name].url,
            )  # fmt: skip
            self.watchdogs[host.name] = HostProcess(name, argv, log_path=self._log(name), netns=host.netns)
        await asyncio.gather(*(p.start() for p in self.watchdogs.values()))

    async def restart_agent(self, host: Host | str, *extra: str) -> None:
        """Stop the agent of `host` and start it again with `extra` flags (none: as configured)."""
        host = self._host(host)
        process = self.agents[host.name]
        await process.stop()
        process.argv = self.agent_argv(host, *extra)
        await process.start()

    async def _start_agents(self) -> None:
        for host in self.workers:
            name = f"agent-{host.name}"
            argv = self.agent_argv(host)
            self.agents[host.name] = HostProcess(name, argv, log_path=self._log(name), netns=host.netns)
        await asyncio.gather(*(p.start() for p in self.agents.values()))

    async def wait_serving(self, timeout: float = 60.0) -> None:
        """Until every running apiserver answers a List."""
        for process, host in zip(self.apiservers, self.control_hosts, strict=False):
            if not process.running:
                continue
            async with Client(f"{host.address}:{API_PORT}", tls=self.tls("admin"), timeout=2, retry_timeout=0) as c:
                await _poll(lambda c=c: c.projects.list(limit=1), timeout, f"apiserver on {host.name}", process)

    async def wait_nodes_ready(self, timeout: float = 90.0) -> None:
        """Until every worker's Node is Ready."""
        async with self.client(timeout=5, retry_timeout=5) as client:

            async def all_ready() -> None:
                nodes = {n.metadata.name: n for n in await client.nodes.list()}
                ready = {name for name, node in nodes.items() if node.status.state == v1.NODE_READY}
                missing = [h.name for h in self.workers if h.name not in ready]
                if missing:
                    raise RuntimeError(f"nodes not Ready: {missing}")

            await _poll(all_ready, timeout, "nodes Ready", None)

    def cut(self, host: Host | str) -> None:
        """Partition a host (its link goes down inside its namespace); its processes keep running."""
        self.network.cut(self._host(host))

    def heal(self, host: Host | str) -> None:
        self.network.heal(self._host(host))

    def _host(self, host: Host | str) -> Host:
        return self.network.hosts[host] if isinstance(host, str) else host

    async def restore(self) -> None:
        """Undo faults: heal every link, resume paused processes, start every stopped one (etcd members, engines,
        apiservers, controllers, watchdogs, agents), and wait until the apiservers serve and every node is Ready."""
        for host in self.network.hosts.values():
            self.network.heal(host)
        processes = [*self.apiservers, *self.controllers, *self.watchdogs.values(), *self.agents.values()]
        for process in processes:
            process.resume()
        for member in self.etcd.members:
            member.process.resume()
        await self.etcd.start()
        for docker in self.dockers.values():
            if not docker.process.running:
                await docker.start()
        for host in self.workers:
            process = self.agents[host.name]
            if process.argv != self.agent_argv(host):
                await process.stop()
                process.argv = self.agent_argv(host)
        for process in processes:
            await process.start()
        await self.wait_serving()
        await self.wait_nodes_ready()

    def logs(self) -> str:
        """The tails of every process's log (for a failing test's report)."""
        processes = [*self.apiservers, *self.controllers, *self.watchdogs.values(), *self.agents.values()]
        if hasattr(self, "etcd"):
            processes += [m.process for m in self.etcd.members]
        return "\n".join(f"==== {p.name} ====\n{p.log_tail()}" for p in processes)

    async def stop(self) -> None:
        """Stop everything in dependency order, then remove all that the run made (even when stopping failed)."""
        try:
            await asyncio.gather(*(p.stop() for p in self.watchdogs.values()), return_exceptions=True)
            await asyncio.gather(*(p.stop() for p in self.agents.values()), return_exceptions=True)
            await asyncio.gather(*(p.stop() for p in self.controllers), return_exceptions=True)
            await asyncio.gather(*(p.stop() for p in self.apiservers), return_exceptions=True)
            if hasattr(self, "etcd"):
                await self.etcd.stop()
            await asyncio.gather(*(d.stop() for d in self.dockers.values()), return_exceptions=True)
        finally:
            await asyncio.to_thread(cleanup.remove_run, self.run_id)


async def _poll(check: object, timeout: float, what: str, process: HostProcess | None) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: BaseException | None = None
    while loop.time() < deadline:
        if process is not None and not process.running:
            raise RuntimeError(f"{process.name} exited:\n{process.log_tail()}")
        try:
            await check()  # type: ignore[operator]  # check is an async callable, typed object by _poll's callers
            return
        except Exception as exc:  # noqa: BLE001 - not there yet
            last = exc
        await asyncio.sleep(0.3)
    raise TimeoutError(f"{what}: not within {timeout}s ({last})")


__all__ = ["AGENT_PORT", "API_PORT", "Fleet", "FleetConfig"]
