"""The autoscaler's reconcile: one key (`KEY`) for the whole cluster, since a scale-up chooses among groups.

Each pass takes the cluster from the view the informers keep up to date (`view.ClusterView.snapshot`: nothing
is rebuilt), the groups from their cache, and then, in order:

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
from caravanserai.controllers.autoscaler.view import ClusterView
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
    provider_list_interval: float = 60.0


class AutoscalerReconciler:
    """See the module docstring. `passes` counts completed passes (tests and the benchmark read it)."""

    def __init__(
        self,
        client: Client,
        groups: CacheReader[v1.NodeGroup],
        view: ClusterView,
        recorder: EventRecorder,
        *,
        clock: Clock,
        config: AutoscalerConfig = AutoscalerConfig(),
        providers: Providers | None = None,
        rng: random.Random | None = None,
        on_pass: Callable[[float], None] | None = None,
    ) -> None:
        self._groups = groups
        self.view = view
        self._clock = clock
        self._config = config
        self.providers = providers or Providers()
        self._book = Bookkeeper(client, self.providers, recorder, config.backoff, config.provider_list_interval)
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
        self._written: dict[str, v1.NodeGroup] = {}  # group → the newest version this reconciler stored
        self.passes = 0

    async def reconcile(self, key: str) -> Result:
        await self.view.wait_synced()
        started = self._clock.monotonic()
        ctx = FilterContext(now=self._clock.now(), heartbeat_timeout=self._config.heartbeat_timeout)
        groups = self._fresh_groups()
        cluster = self.view.snapshot()
        self._book.forget({g.metadata.name for g in groups})
        current = [await self._book.run(group, cluster, ctx) for group in groups]
        self._remember(current)
        grown = await self._up.run(current, cluster, ctx)
        if grown is not None:
            self._remember([grown])
        for group in current:
            if grown is not None and grown.metadata.name == group.metadata.name:
                group = grown
            await self._down.run(group, cluster, ctx)
        self.passes += 1
        if self._on_pass is not None:
            self._on_pass(self._clock.monotonic() - started)
        return Result(requeue_after=self._config.scan_interval)

    def _fresh_groups(self) -> list[v1.NodeGroup]:
        """The groups from their cache, each replaced by the version this reconciler last stored when the cache has
        not caught up with it yet: a pass must see the scale-up the pass before recorded, or it asks again."""
        cached = {g.metadata.name: g for g in self._groups.list()}
        for name in [n for n in self._written if n not in cached]:
            del self._written[name]
        fresh = []
        for name in sorted(cached):
            group, written = cached[name], self._written.get(name)
            if written is not None and written.metadata.uid == group.metadata.uid and _newer(written, group):
                group = written
            fresh.append(group)
        return fresh

    def _remember(self, groups: list[v1.NodeGroup]) -> None:
        for group in groups:
            self._written[group.metadata.name] = group


def _newer(a: v1.NodeGroup, b: v1.NodeGroup) -> bool:
    """Whether `a` is a later version of the group than `b` (resource versions are etcd revisions)."""
    try:
        return int(a.metadata.resource_version or 0) > int(b.metadata.resource_version or 0)
    except ValueError:
        return False


__all__ = ["AutoscalerConfig", "AutoscalerReconciler", "KEY"]
