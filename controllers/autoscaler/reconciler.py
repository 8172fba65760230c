"""The autoscaler's reconcile: one key (`KEY`) for the whole cluster, since a scale-up chooses among groups.

Each pass reads the informer caches once (`snapshot.build`) and then, in order:

1. per group, brings its status up to date (`bookkeeping`: joined nodes, decisions not yet acted on, nodes that
   never registered, idle times, sizes, machines the cluster does not know);
2. decides at most one scale-up (`scaleup`);
3. per group, continues or starts at most one scale-down (`removal`).

It runs again `scan_interval` seconds later, and at once (collapsed by the queue) when a project, node or group
changes. Only the leader acts (the Manager runs controllers only while it holds the lease).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import EventRecorder, Result
from caravanserai.controllers.autoscaler.bookkeeping import Bookkeeper
from caravanserai.controllers.autoscaler.expanders import LEAST_WASTE
from caravanserai.controllers.autoscaler.providers import Providers
from caravanserai.controllers.autoscaler.removal import ScaleDown
from caravanserai.controllers.autoscaler.scaleup import ScaleUp
from caravanserai.controllers.autoscaler.snapshot import Requests, build
from caravanserai.controllers.scheduler.filters import DEFAULT_HEARTBEAT_TIMEOUT, FilterContext
from caravanserai.informer import CacheReader
from caravanserai.project.lifecycle import DEFAULT_HANDOFF

log = structlog.get_logger(__name__)

KEY = "cluster"


@dataclass(frozen=True, slots=True)
class AutoscalerConfig:
    """The process's settings (flags of `app.add_arguments`)."""

    expander: str = LEAST_WASTE
    scan_interval: float = 5.0
    backoff: float = 300.0
    new_node_grace: float = 30.0
    handoff_timeout: float = DEFAULT_HANDOFF
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT


@dataclass(frozen=True, slots=True)
class Caches:
    groups: CacheReader[v1.NodeGroup]
    nodes: CacheReader[v1.Node]
    leases: CacheReader[v1.Lease]
    projects: CacheReader[v1.Project]


class AutoscalerReconciler:
    """See the module docstring. `passes` counts completed passes (tests and the benchmark read it)."""

    def __init__(
        self,
        client: Client,
        caches: Caches,
        recorder: EventRecorder,
        *,
        clock: Clock,
        config: AutoscalerConfig = AutoscalerConfig(),
        providers: Providers | None = None,
        rng: random.Random | None = None,
        on_pass: Callable[[float], None] | None = None,
    ) -> None:
        self._caches = caches
        self._clock = clock
        self._config = config
        self.providers = providers or Providers()
        self._book = Bookkeeper(client, self.providers, recorder, config.backoff)
        self._up = ScaleUp(
            client,
            self.providers,
            recorder,
            config.expander,
            config.backoff,
            config.new_node_grace,
            rng=rng or random.Random(),
        )
        self._down = ScaleDown(client, self.providers, recorder, config.handoff_timeout)
        self._on_pass = on_pass
        self._requests = Requests()
        self.passes = 0

    async def reconcile(self, key: str) -> Result:
        started = self._clock.monotonic()
        ctx = FilterContext(now=self._clock.now(), heartbeat_timeout=self._config.heartbeat_timeout)
        caches = self._caches
        groups = sorted(caches.groups.list(), key=lambda g: g.metadata.name)
        projects = caches.projects.list()
        cluster = build(caches.nodes.list(), caches.leases.list(), projects, self._requests)
        self._requests.forget_others({p.metadata.name for p in projects})
        current = [await self._book.run(group, cluster, ctx) for group in groups]
        grown = await self._up.run(current, cluster, ctx)
        for group in current:
            if grown is not None and grown.metadata.name == group.metadata.name:
                group = grown
            await self._down.run(group, cluster, ctx)
        self.passes += 1
        if self._on_pass is not None:
            self._on_pass(self._clock.monotonic() - started)
        return Result(requeue_after=self._config.scan_interval)


__all__ = ["AutoscalerConfig", "AutoscalerReconciler", "Caches", "KEY"]
