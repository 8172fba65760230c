"""The agent process: every part of cara-agent, wired and run in one TaskGroup.

    await Agent(AgentConfig(server="10.0.0.1:7420", node_name="node-1")).run()

Parts (each `async def run()`-style, independent of the others), made in dependency order with no part patched
after it is made: the controller's work queue first (the health prober, the self-fence and the sweeps add to it),
then the reconciler and its controller, then the node's heartbeat:

* **Agent gRPC service** on `--listen` (logs, exec, port-forward, for admin and those whose roles allow it, asked
  of the API server through the agent's client: `access.review`; with the standard health service and server
  reflection),
  started first so the Node can advertise its port. With
  the agent's TLS certificate and key it is served over TLS with that certificate (and requires client
  certificates signed by the CA when one is given), as the API server does; otherwise in plain text.
* **Heartbeat**: registers the Node, then renews its Lease every `heartbeat_interval` seconds.
* **Throughput**: measured once registered, then every `throughput_interval` seconds.
* **Manager**: the projects informer (field selector `status.nodeRef=<node>`: a node reads only the projects it
  runs) and the `ProjectReconciler`'s controller with `reconcile_workers` reconcile workers; /metrics, /healthz
  and /readyz always: on `--health-listen` (loopback by default), or on every interface at `--metrics-port` when
  that is given. The ingress follows every Route and every Node (`ingress.server`), no other node's project.
* **Volumes** (`volumeflow`): restores before start run in the reconcile; the volumes' periodic and requested
  backups are tasks of their own (`agent-backups`), and the node's images and restore rates are reported in its
  status every `inventory_interval` seconds and after each restore (`agent-inventory`).
* **Fencing and Docker events**: once the informer has synced, every project found on Docker (containers,
  networks, volumes labelled for this node) is queued, so projects that are no longer assigned here, or whose
  uid changed, are removed; then Docker's events stream queues a project whenever one of its containers
  changes, and the sweep is repeated after every events reconnect and every `resync_interval` seconds.
  Projects that leave the assignment while the agent runs (or during a relist) arrive as informer deletions.

* **Network pool** (`netpool`): keeps `network_pool` spare project networks ready in the background, so that a
  project arriving takes one instead of waiting for Docker to make it; removed projects give theirs back. The
  heartbeat (so the Node's registration and Ready) starts once the pool is warm, at most `POOL_WARMUP` seconds.
  A clean stop removes the spare networks once the reconciles have drained (at most `RELEASE_TIMEOUT` seconds
  plus `RELEASE_PER_NETWORK` per network of the pool: dockerd removes them one at a time, and a pool of 20 took
  4 s on an idle host): a stopped agent must not keep them.

* **Self-fencing** (`selffence`): with no answered heartbeat for `fence_after` seconds the agent stops its
  containers (keeping them) and leaves everything alone until the API answers again; then the projects still bound
  here start again and every project is queued. The deadline is recorded in `fence_dir` for the node's watchdog
  and the next run; before any part starts, a recorded deadline that has passed is met (`SelfFence.resume`).

Guarantees: the agent never stops or removes a container merely because it stops or loses Docker, and loses the API
server for less than `fence_after`; `stop()` drains the queue (for at most `shutdown_grace`), and cancelling `run()`
stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import grpc
import structlog

from caravanserai import meta, v1
from caravanserai.agent.access.execstream import ExecRunner
from caravanserai.agent.access.logs import LogStreamer
from caravanserai.agent.access.portforward import PortForwarder
from caravanserai.agent.access.review import AccessReview
from caravanserai.agent.access.service import AgentService
from caravanserai.agent.config import AgentConfig
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.docker.events import DockerEventWatcher
from caravanserai.agent.docker.records import ContainerEvent
from caravanserai.agent.fencing.record import FenceFiles
from caravanserai.agent.host import inventory, machine
from caravanserai.agent.host.throughput import ThroughputMeter, measure_forever
from caravanserai.agent.ingress.endpoints import ServiceEndpoints
from caravanserai.agent.ingress.hop import HopAuth
from caravanserai.agent.ingress.server import Ingress
from caravanserai.agent.node import Heartbeat, NodeRegistrar
from caravanserai.agent.reconciler import ProjectReconciler
from caravanserai.agent.selffence import SelfFence
from caravanserai.agent.volumeflow import VolumeFlow
from caravanserai.agent.volumes.repository import RepositoryResolver
from caravanserai.agent.volumes.restic import ResticSettings
from caravanserai.agent.volumes.shared import RestoreRates
from caravanserai.agent.workload.datafiles import DataFiles, default_root
from caravanserai.agent.workload.health import HealthProber
from caravanserai.agent.workload.netpool import NetworkPool, default_pool_size
from caravanserai.agent.workload.project import ProjectRuntime
from caravanserai.agent.workload.servicedata import ServiceData
from caravanserai.agent.workload.subnets import allocator
from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.client import Client
from caravanserai.clock import Clock, SystemClock, run_within
from caravanserai.controller import Controller, ControllerMetrics, EventRecorder, Manager, enqueue_mapped
from caravanserai.errors import CaravanseraiError
from caravanserai.informer import Backoff, Informer, WatchOptions
from caravanserai.process.identity import Authenticator, load_token_file
from caravanserai.process.introspection import serve_introspection, set_serving
from caravanserai.project import backups, datarefs
from caravanserai.text.addresses import is_loopback, parse_address
from caravanserai.workqueue import WorkQueue

log = structlog.get_logger(__name__)

COMPONENT = "cara-agent"
GRPC_GRACE = 2.0
POOL_WARMUP = 5.0  # seconds the first heartbeat waits at most for the network pool to fill
RELEASE_TIMEOUT = 5.0  # seconds a clean stop spends at most removing spare networks, plus RELEASE_PER_NETWORK each
RELEASE_PER_NETWORK = 0.5  # dockerd removes networks one after another: about 0.2 s each on an idle host
FENCE_REPORT_RETRY = 5.0  # seconds before the fence record's condition is written again after a refusal
SERVICES = ("caravanserai.v1.Agent",)


class Agent:
    """One node's agent. `run()` returns only when cancelled, after `stop()`, or when a part fails."""

    def __init__(self, config: AgentConfig, *, clock: Clock | None = None, shutdown_grace: float = 10.0) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.shutdown_grace = shutdown_grace
        self.port = 0  # the Agent gRPC service's port, once started
        self.ingress_port = 0  # the ingress proxy's port, once started (0: --ingress-listen off)
        self.synced = asyncio.Event()  # set once the informer synced and the first fencing sweep was queued
        self.controller: Controller | None = None
        self._manager: Manager | None = None
        self._stop_requested = False

    def stop(self) -> None:
        """Ask `run()` to stop cleanly: in-flight reconciles finish (within `shutdown_grace`), then it returns.
        Safe to call at any time, also before `run()` has set everything up."""
        self._stop_requested = True
        if self._manager is not None:
            self._manager.stop()

    async def run(self) -> None:
        config = self.config
        log.info("agent starting", node=config.node_name, server=config.server, docker=config.docker_host)
        async with (
            Client(config.server, tls=config.tls, token=config.token) as client,
            DockerRuntime.connect(config.docker_host, pull_timeout=config.pull_timeout) as docker,
            Ingress(
                docker,
                node=config.node_name,
                listen=config.ingress_listen,
                limits=config.ingress_limits,
                hops=HopAuth.from_tls(config.node_name, config.tls, clock=self.clock),
            ).serving() as ingress,
        ):
            self.ingress_port = ingress.port
            server = await self._start_grpc(docker, client)
            try:
                await self._run_parts(client, docker, ingress)
            finally:
                await server.stop(GRPC_GRACE)

    async def _start_grpc(self, docker: DockerRuntime, client: Client) -> grpc.aio.Server:
        server = grpc.aio.server()
        node, tls = self.config.node_name, self.config.tls
        secure = tls is not None and bool(tls.cert and tls.key)
        endpoints = ServiceEndpoints(docker, node=node)
        tokens = load_token_file(self.config.token_file) if self.config.token_file else {}
        authenticator = Authenticator(client_certs=secure and tls is not None and bool(tls.ca), tokens=tokens)
        service = AgentService(
            LogStreamer(docker, node=node),
            PortForwarder(endpoints),
            ExecRunner(endpoints),
            authenticator=authenticator,
            access=AccessReview(client, clock=self.clock),  # asks the API server about callers' roles
        )
        api_pb2_grpc.add_AgentServicer_to_server(service, server)
        health = await serve_introspection(server, SERVICES)
        if tls is not None and secure:  # the node's certificate; with a CA, client certificates are required
            self.port = server.add_secure_port(self.config.listen, tls.server_credentials())
        else:
            self.port = server.add_insecure_port(self._plain_listen_address())
        await server.start()
        await set_serving(health, SERVICES)
        log.info("agent service listening", address=self.config.listen, port=self.port, tls=secure)
        return server

    def _http_address(self) -> tuple[str, int]:
        """Where /healthz, /readyz and /metrics are served: every interface at `metrics_port` when one is given,
        else `health_listen`."""
        if self.config.metrics_port is not None:
            return "0.0.0.0", self.config.metrics_port
        return parse_address(self.config.health_listen, flag="--health-listen")

    @property
    def http_port(self) -> int:
        """The port of /healthz (0 until the manager serves it)."""
        return self._manager.metrics_port if self._manager is not None else 0

    def _plain_listen_address(self) -> str:
        """Where plain TCP may listen: `--listen` when it is loopback or `--allow-insecure` was given, otherwise
        the same port on 127.0.0.1 (logs are not served unauthenticated to the network)."""
        listen = self.config.listen
        if is_loopback(listen) or self.config.allow_insecure:
            return listen
        port = parse_address(listen, flag="--listen").port
        log.warning(
            "no TLS: the log service listens on loopback only; give --tls-cert/--tls-key (and --tls-ca) "
            "or --allow-insecure to serve it on " + listen,
            listen=listen,
        )
        return f"127.0.0.1:{port}"

    async def _run_parts(self, client: Client, docker: DockerRuntime, ingress: Ingress) -> None:
        """Make the parts in dependency order (each from parts made before it), then run them until the manager
        returns. The work queue comes first: the health prober, the fence and the sweeps add to it."""
        config, clock = self.config, self.clock
        manager = self._make_manager(client)
        informer: Informer[v1.Project] = manager.informers.informer(
            v1.Project, field_selector=f"status.nodeRef={config.node_name}"
        )
        metrics = ControllerMetrics(COMPONENT)
        queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=metrics.queue)
        subnets = allocator(docker, config.network_range, config.network_prefix, node=config.node_name)
        networks = NetworkPool(
            docker, node=config.node_name, size=await self._pool_size(docker), clock=clock, subnets=subnets
        )
        projects = ProjectRuntime(
            docker,
            node=config.node_name,
            stop_timeout=config.stop_timeout,
            networks=networks,
            allowed_host_paths=config.allowed_host_paths,
            clock=clock,
            on_switch=ingress.switched,
        )
        sweep = functools.partial(self._sweep, informer, queue, projects)
        fence = self._make_fence(client, projects, on_unfenced=sweep)
        await fence.resume()  # a deadline that passed while the agent was down is met before anything else runs
        prober = HealthProber(clock=clock, on_change=queue.add)
        reconciler, volumes = self._make_reconciler(client, informer, projects, fence=fence, prober=prober)
        workers = config.reconcile_workers
        controller = Controller(
            COMPONENT, reconciler, queue, max_concurrent_reconciles=workers, clock=clock, metrics=metrics
        )
        self._watch(controller, informer, manager, ingress, volumes.resolver)
        registrar = NodeRegistrar(
            client, config, docker_info=docker.info, clock=clock, agent_port=self.port, ingress_port=ingress.port
        )
        heartbeat = Heartbeat(client, registrar, config, clock=clock, on_contact=fence.contact)
        meter = ThroughputMeter(client, clock=clock, size=config.throughput_bytes)
        await self._run_beside(
            manager,
            {
                "agent-heartbeat": self._beat_once_warm(heartbeat, networks),
                "agent-health-probes": prober.run(),
                "agent-network-pool": networks.run(),
                "agent-self-fence": fence.run(),
                "agent-throughput": self._measure(registrar, meter),
                "agent-backups": volumes.run(),
                "agent-inventory": self._report_inventory(registrar, docker, volumes.rates),
                "agent-fence-record": self._report_fence_record(registrar, fence),
                "agent-docker": self._fence_and_watch(informer, queue, sweep, docker, on_exit=reconciler.saw_exit),
            },
        )
        await self._release_spares(networks)

    async def _pool_size(self, docker: DockerRuntime) -> int:
        """`network_pool`, or when None the default for this machine's cores (`netpool.default_pool_size`)."""
        if self.config.network_pool is not None:
            return self.config.network_pool
        cores = machine.machine_capacity(await docker.info()).cpu_millis // 1000
        return default_pool_size(cores)

    async def _release_spares(self, networks: NetworkPool) -> None:
        """After a clean stop (the manager returned, every part cancelled): remove the spare networks."""
        timeout = RELEASE_TIMEOUT + RELEASE_PER_NETWORK * max(networks.size, len(networks.spare))
        try:
            await run_within(self.clock, networks.release_spares(), timeout)
        except (TimeoutError, CaravanseraiError) as exc:
            log.warning("spare networks not all removed on stop", node=self.config.node_name, error=str(exc))

    def _make_fence(
        self, client: Client, projects: ProjectRuntime, *, on_unfenced: Callable[[], Awaitable[None]]
    ) -> SelfFence:
        config = self.config
        return SelfFence(
            fence_after=config.fence_after,
            clock=self.clock,
            projects=projects,
            client=client,
            node=config.node_name,
            on_unfenced=on_unfenced,
            files=FenceFiles(Path(config.fence_dir), config.node_name) if config.fence_dir else None,
        )

    def _make_manager(self, client: Client) -> Manager:
        host, port = self._http_address()
        return Manager(
            client,
            clock=self.clock,
            metrics_host=host,
            metrics_port=port,
            shutdown_timeout=self.shutdown_grace,
            cache_sync_timeout=float("inf"),  # an unreachable API server is waited for, never fatal
            # After an outage the assignments watch is what tells a returning agent that its projects moved away:
            # it is retried at least every heartbeat interval (client-go's 30 s cap, doubled by jitter, would
            # leave stale copies running for up to a minute after the API server answers again).
            watch_options=WatchOptions(backoff=Backoff(cap=self.config.heartbeat_interval)),
        )

    def _make_reconciler(
        self,
        client: Client,
        informer: Informer[v1.Project],
        projects: ProjectRuntime,
        *,
        fence: SelfFence,
        prober: HealthProber,
    ) -> tuple[ProjectReconciler, VolumeFlow]:
        """The reconciler, and its volume steps (whose backup tasks and restore rates run beside it)."""
        config, clock = self.config, self.clock
        recorder = EventRecorder(client, component=COMPONENT, host=config.node_name, clock=clock)
        settings = ResticSettings(
            binary=config.restic, cache_dir=config.restic_cache_dir, timeout=config.restic_timeout
        )
        volumes = VolumeFlow(
            projects=projects, client=client, lookup=informer.get, clock=clock, recorder=recorder, settings=settings
        )
        reconciler = ProjectReconciler(
            client=client,
            projects=projects,
            lookup=informer.get,
            node=config.node_name,
            clock=clock,
            recorder=recorder,
            prober=prober,
            fenced=lambda: fence.fenced,
            data=ServiceData(client, DataFiles(config.data_dir or default_root(config.node_name))),
            volumes=volumes,
        )
        return reconciler, volumes

    def _watch(
        self,
        controller: Controller,
        informer: Informer[v1.Project],
        manager: Manager,
        ingress: Ingress,
        repositories: RepositoryResolver,
    ) -> None:
        """Feed the controller from the projects bound here and the Secrets and Configs they read (their backup
        repositories' too), the ingress from the informers of every Route and Node; add the controller."""
        controller.watch(informer, enqueue_mapped(_own_key))  # by key, as everything else queues projects
        ingress.follow(manager.informers)
        for cls in (v1.Secret, v1.Config):  # the server sends only those referenced by projects bound here
            controller.watch(manager.informers.informer(cls), enqueue_mapped(_readers(informer, repositories)))
        manager.add(controller)
        self.controller, self._manager = controller, manager
        if self._stop_requested:
            manager.stop()

    async def _run_beside(self, manager: Manager, parts: Mapping[str, Coroutine[Any, Any, None]]) -> None:
        """Run `parts` (task name → coroutine) in one TaskGroup beside the manager until it returns (after
        `stop()`; it raises when a part of it fails), then cancel them."""
        async with asyncio.TaskGroup() as group:
            background = [group.create_task(part, name=name) for name, part in parts.items()]
            await manager.run()
            for task in background:
                task.cancel()

    async def _beat_once_warm(self, heartbeat: Heartbeat, networks: NetworkPool) -> None:
        """The heartbeat, started once the network pool is warm (at most `POOL_WARMUP` seconds): a node reported
        Ready takes its first projects with spare networks, not with the pool's first networks still being made."""
        with contextlib.suppress(TimeoutError):
            await run_within(self.clock, networks.warmed(), POOL_WARMUP)
        await heartbeat.run()

    async def _report_fence_record(self, registrar: NodeRegistrar, fence: SelfFence) -> None:
        """Keep the Node's FenceUnrecorded condition to what the self-fence last found (`record_problem`); a write
        the API refuses is tried again `FENCE_REPORT_RETRY` seconds later."""
        await registrar.registered.wait()
        reported: str | None = None  # the first pass clears a condition an earlier run left
        while True:
            fence.record_changed.clear()
            problem = fence.record_problem
            if problem != reported:
                try:
                    await registrar.write_fence_record(problem)
                    reported = problem
                except CaravanseraiError as exc:
                    log.warning(
                        "cannot report the fence record's condition", node=self.config.node_name, error=str(exc)
                    )
                    await self.clock.sleep(FENCE_REPORT_RETRY)
                    continue
            await fence.record_changed.wait()

    async def _report_inventory(self, registrar: NodeRegistrar, docker: DockerRuntime, rates: RestoreRates) -> None:
        """The node's images and restore rates in its status, once registered, then now and then."""
        await registrar.registered.wait()

        async def collect() -> tuple[list[v1.NodeImage], dict[str, str]]:
            return inventory.node_images(await docker.list_images()), inventory.restore_rates(rates.rates())

        interval = self.config.inventory_interval
        await inventory.report_forever(
            collect, registrar.write_inventory, clock=self.clock, interval=interval, wake=rates.changed
        )

    async def _measure(self, registrar: NodeRegistrar, meter: ThroughputMeter) -> None:
        await registrar.registered.wait()
        interval = self.config.throughput_interval
        await measure_forever(meter, registrar.write_throughput, clock=self.clock, interval=interval)

    async def _fence_and_watch(
        self,
        informer: Informer[v1.Project],
        queue: WorkQueue[str],
        sweep: Callable[[], Awaitable[None]],
        docker: DockerRuntime,
        *,
        on_exit: Callable[[ContainerEvent], None],
    ) -> None:
        """After the first sync: sweep Docker, then follow Docker events (exits to `on_exit`, projects to the
        queue) and sweep again periodically."""
        await informer.wait_synced()
        await sweep()
        self.synced.set()
        watcher = DockerEventWatcher(
            docker,
            node=self.config.node_name,
            clock=self.clock,
            on_project=queue.add,
            on_reconnect=sweep,
            on_exit=on_exit,
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(watcher.run(), name="agent-docker-events")
            group.create_task(self._sweep_forever(sweep), name="agent-sweep")

    async def _sweep(self, informer: Informer[v1.Project], queue: WorkQueue[str], projects: ProjectRuntime) -> None:
        """Queue every project assigned here and every project that has Docker objects of this node."""
        try:
            present = await projects.projects_present()
        except CaravanseraiError as exc:
            log.warning("docker sweep failed", error=str(exc))
            present = set()
        assigned = {naming.key_of(p) for p in informer.list()}
        for name in sorted(present | assigned):
            queue.add(name)
        orphans = sorted(present - assigned)
        if orphans:
            log.info("fencing projects no longer assigned here", projects=orphans)

    async def _sweep_forever(self, sweep: Callable[[], Awaitable[None]]) -> None:
        while True:
            await self.clock.sleep(self.config.resync_interval)
            await sweep()


def _own_key(project: v1.Project) -> list[str]:
    """The queue key of a project bound here (`naming.key_of`)."""
    return [naming.key_of(project)]


def _readers(projects: Informer[v1.Project], repositories: RepositoryResolver) -> Callable[[Any], list[str]]:
    """The keys of the projects (bound here) that read a given Secret or Config, or whose backup repositories
    it opens (a fixed password wakes a project that waits for its restore); only projects of the object's
    namespace read it."""

    def reads(project: v1.Project, resource: str, name: str) -> bool:
        if datarefs.references(project.spec, resource, name):
            return True
        return resource == "secrets" and repositories.uses_secret(
            project.metadata.namespace, backups.repositories(project.spec), name
        )

    def readers(obj: Any) -> list[str]:
        resource = meta.kind_of(obj).plural
        namespace = obj.metadata.namespace or meta.DEFAULT_NAMESPACE
        return [
            naming.key_of(p)
            for p in projects.list()
            if (p.metadata.namespace or meta.DEFAULT_NAMESPACE) == namespace and reads(p, resource, obj.metadata.name)
        ]

    return readers


__all__ = ["Agent", "COMPONENT"]
