"""The Manager: runs a process's informers and controllers under one TaskGroup, with health, metrics, leader
election and a clean stop.

    manager = Manager(client, metrics_port=8080, leader_election=LeaderElectionConfig(name="cara-ttl"))
    projects = manager.informers.informer(v1.Project)
    controller = Controller("ttl", TTLReconciler(client, projects))
    controller.watch(projects)
    manager.add(controller)
    manager.install_signal_handlers()          # SIGTERM / SIGINT → manager.stop()
    await manager.run()

Guarantees:

* **Caches first.** Informers start at once; controllers start only after every informer has synced (within
  `cache_sync_timeout`, default 2 minutes, else `run` raises TimeoutError), so no reconcile reads a half-filled
  cache.
* **Leader election** (`leader_election=…`): informers run on every replica, keeping standbys warm; controllers
  run only while this replica holds the lease, and are cancelled at once when it is lost.
* **Health and metrics** over HTTP when `metrics_port` is not None (0 picks a free port; see `metrics_port`
  after start): `/healthz` (200 while running; 500 when leading with an overdue renew), `/readyz` (200 once
  caches synced, 503 before, while stopping and while an informer's list or watch fails — e.g. its kind's
  definition was deleted — naming it), `/metrics` (Prometheus text: queues, reconciles, informers,
  leadership, and the operator's own metrics registered on `manager.registry`, a prometheus_client
  `CollectorRegistry`: `Counter("backups_total", "…", registry=manager.registry)`; pass `registry=REGISTRY` to
  serve the process-wide default one).
* **Clean stop.** `stop()` (SIGTERM) shuts every queue down, lets in-flight and queued keys finish (at most
  `shutdown_timeout`, default 30 s, then cancels them), releases the lease, stops the informers and returns from
  `run()`. Cancelling `run()` instead stops everything at once. A failure of any part (e.g. a cache mutation)
  stops the rest and is raised from `run()`.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, generate_latest

from caravanserai.client import Client
from caravanserai.clock import Clock, SystemClock, run_within
from caravanserai.controller import metrics
from caravanserai.controller.controller import Controller
from caravanserai.controller.httpserver import TEXT, HttpServer
from caravanserai.controller.leaderelection import LeaderElectionConfig, LeaderElector
from caravanserai.informer import SharedInformerFactory, WatchOptions
from caravanserai.process.shell import SIGNALS

log = structlog.get_logger(__name__)

DEFAULT_CACHE_SYNC_TIMEOUT = 120.0
DEFAULT_SHUTDOWN_TIMEOUT = 30.0


class Manager:
    """Runs informers and controllers of one process. See the module docstring."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        metrics_host: str = "127.0.0.1",
        metrics_port: int | None = None,
        leader_election: LeaderElectionConfig | None = None,
        cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        resync_period: float = 0.0,
        detect_mutations: bool | None = None,
        watch_options: WatchOptions = WatchOptions(),
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.client = client
        # The operator's own Prometheus metrics, served on /metrics after the manager's.
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._clock: Clock = clock or SystemClock()
        self.informers = SharedInformerFactory(
            client,
            clock=self._clock,
            resync_period=resync_period,
            detect_mutations=detect_mutations,
            watch_options=watch_options,
        )
        self.elector = LeaderElector(client, leader_election, clock=self._clock) if leader_election else None
        self._controllers: list[Controller] = []
        self._metrics_host = metrics_host
        self._metrics_port = metrics_port
        self._http: HttpServer | None = None
        self._cache_sync_timeout = cache_sync_timeout
        self._shutdown_timeout = shutdown_timeout
        self._stop = asyncio.Event()
        self._running = False
        self._synced = False
        self._stopping = False
        self._signals: list[signal.Signals] = []

    # ---- setting up -------------------------------------------------------------------------------------------

    def add(self, controller: Controller) -> Controller:
        """Run `controller` with this manager (before `run`). Its informers must come from `self.informers`. It
        starts no reconcile while the manager is not `leading`."""
        if self._running:
            raise RuntimeError("add controllers before the manager runs")
        controller.may_act = lambda: self.leading
        self._controllers.append(controller)
        return controller

    @property
    def controllers(self) -> list[Controller]:
        return list(self._controllers)

    def install_signal_handlers(self) -> None:
        """Make SIGTERM and SIGINT call `stop()` until `run()` returns (on the running loop; Unix only)."""
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:  # the process shell's stopping signals
            loop.add_signal_handler(sig, self.stop)
            self._signals.append(sig)

    def stop(self) -> None:
        """Ask `run()` to stop cleanly (drain queues, release the lease, stop informers). Safe to call anytime."""
        self._stop.set()

    # ---- state ------------------------------------------------------------------------------------------------

    @property
    def metrics_port(self) -> int:
        """The port /metrics, /healthz and /readyz are served on (0 when not serving)."""
        return self._http.port if self._http is not None else 0

    @property
    def leading(self) -> bool:
        """Whether controllers may act now: once synced without leader election; with it, while the lease is held
        and renewed within its deadline (`LeaderElector.holds_lease`)."""
        return self.elector.holds_lease() if self.elector is not None else self._synced

    def healthz(self) -> tuple[int, str, str]:
        if not self._running:
            return 500, TEXT, "not running\n"
        elector = self.elector
        if elector is not None and elector.is_leader:
            overdue = self._clock.monotonic() - elector.last_renew - elector.config.lease_duration
            if overdue > 0:
                return 500, TEXT, f"leader election: lease renewal overdue by {overdue:.1f}s\n"
        return 200, TEXT, "ok\n"

    def readyz(self) -> tuple[int, str, str]:
        if self._stopping:
            return 503, TEXT, "stopping\n"
        if not self._synced:
            pending = [i.resource for i in self.informers.informers() if not i.has_synced()]
            return 503, TEXT, f"caches not synced: {', '.join(pending)}\n"
        failing = [f"{i.resource} ({i.reflector.failure})" for i in self.informers.informers() if i.reflector.failure]
        if failing:
            return 503, TEXT, f"watches failing: {'; '.join(failing)}\n"
        return 200, TEXT, "ok\n"

    def metrics_text(self) -> str:
        for c in self._controllers:  # sample depth of queues that do not report it themselves
            c.metrics.queue.current_depth = len(c.queue)
        families = metrics.controller_families(c.metrics for c in self._controllers)
        families += metrics.informer_families(self.informers.informers())
        if self.elector is not None:
            leader = metrics.MetricFamily(
                "caravanserai_leader_election_master_status", "1 while this process holds the lease.", "gauge"
            )
            labels = {"name": self.elector.config.name}
            leader.samples.append(metrics.Sample(leader.name, labels, 1 if self.elector.is_leader else 0))
            families.append(leader)
        return metrics.render(families) + generate_latest(self.registry).decode()

    # ---- running ----------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until `stop()` (returns after a clean stop) or cancellation; raises the first failure of a part.
        However it ends, the controllers' queues are shut down after it (no delayed add keeps a timer running)."""
        if self._running:
            raise RuntimeError("the manager is already running")
        self._check_sources()
        self._running, self._synced, self._stopping = True, False, False
        try:
            if self._metrics_port is not None:
                self._http = HttpServer(self._routes(), host=self._metrics_host, port=self._metrics_port)
                await self._http.start()
            async with asyncio.TaskGroup() as group:
                informers = group.create_task(self.informers.run(), name="manager-informers")
                if await self._wait_synced():
                    workers = group.create_task(self._run_controllers(), name="manager-controllers")
                    await self._stop.wait()
                    await self._shut_down(workers)
                informers.cancel()
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        finally:
            self._running = False
            # However the run ended (stop, cancellation, a failure), no queue keeps a delayed-add timer running.
            for controller in self._controllers:
                await controller.shut_down(drain=False)
            loop = asyncio.get_running_loop()
            while self._signals:
                loop.remove_signal_handler(self._signals.pop())
            if self._http is not None:
                await self._http.close()
                self._http = None
        log.info("manager stopped")

    def _routes(self) -> dict[str, Any]:
        return {
            "/healthz": self.healthz,
            "/readyz": self.readyz,
            "/metrics": lambda: (200, metrics.CONTENT_TYPE, self.metrics_text()),
        }

    def _check_sources(self) -> None:
        known = {id(i) for i in self.informers.informers()}
        for controller in self._controllers:
            for informer in controller.informers:
                if id(informer) not in known:
                    raise ValueError(
                        f"controller {controller.name!r} watches an informer for {informer.resource} that was not "
                        "made by this manager's informer factory (use manager.informers.informer(...))"
                    )

    async def _wait_synced(self) -> bool:
        """Wait for every cache; False when `stop()` came first. TimeoutError after `cache_sync_timeout`."""
        synced = asyncio.ensure_future(self.informers.wait_synced())
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await run_within(
                self._clock,
                asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED),
                self._cache_sync_timeout,
            )
        except TimeoutError:
            raise TimeoutError(f"informer caches did not sync within {self._cache_sync_timeout:g}s") from None
        finally:
            for task in (synced, stopped):
                task.cancel()
            await asyncio.wait({synced, stopped})
        self._synced = synced.done() and not synced.cancelled()
        if self._synced:
            log.info("caches synced", informers=len(self.informers.informers()))
        return self._synced

    async def _run_controllers(self) -> None:
        if self.elector is None:
            await self._run_all_controllers()
        else:
            await self.elector.run(self._run_all_controllers)

    async def _run_all_controllers(self) -> None:
        async with asyncio.TaskGroup() as group:
            for controller in self._controllers:
                group.create_task(controller.run(), name=f"controller-{controller.name}")

    async def _shut_down(self, workers: asyncio.Task[None]) -> None:
        """Drain the queues, let the controllers (and the lease) finish; cancel what overruns the timeout."""
        self._stopping = True
        log.info("stopping: draining work queues", timeout=self._shutdown_timeout)
        try:
            await run_within(self._clock, self._drain(workers), self._shutdown_timeout)
        except TimeoutError:
            log.warning("shutdown timeout: cancelling reconciles still running")
            workers.cancel()
            await asyncio.wait({workers})

    async def _drain(self, workers: asyncio.Task[None]) -> None:
        await asyncio.gather(*(c.shut_down(drain=True) for c in self._controllers))
        if self.elector is not None and not self.elector.is_leader:
            workers.cancel()  # still campaigning: nothing to wait for
        await asyncio.wait({workers})


__all__ = ["DEFAULT_CACHE_SYNC_TIMEOUT", "DEFAULT_SHUTDOWN_TIMEOUT", "Manager"]
