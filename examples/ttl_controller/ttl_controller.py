"""A custom controller, written only against Caravanserai's public library: delete projects whose TTL expired.

A project annotated `caravanserai.io/ttl: 30s` (any duration: `90`, `500ms`, `3m`, `1h30m`) is deleted once
that long has passed since its creation, and a Normal event `TTLExpired` records why. Until then the controller
asks to look again exactly when the TTL runs out (`Result(requeue_after=…)`), so no polling is needed.

    python examples/ttl_controller/ttl_controller.py --server 127.0.0.1:7420 --metrics-port 8081 --leader-elect

docs/writing-a-controller.md walks through this file.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock, SystemClock, seconds
from caravanserai.controller import (
    Controller,
    EventRecorder,
    LeaderElectionConfig,
    Manager,
    Result,
    TerminalError,
    enqueue_object,
)
from caravanserai.errors import NotFound
from caravanserai.informer import CacheReader
from caravanserai.process.logging import configure_logging
from caravanserai.text.durations import parse_duration

log = structlog.get_logger(__name__)

TTL_ANNOTATION = "caravanserai.io/ttl"
COMPONENT = "ttl-controller"


class TTLReconciler:
    """Reconciles one project: nothing to do, look again at expiry, or delete it now."""

    def __init__(
        self, client: Client, projects: CacheReader[v1.Project], recorder: EventRecorder, *, clock: Clock
    ) -> None:
        self._client = client
        self._projects = projects  # the informer's cache: read-only
        self._recorder = recorder
        self._clock = clock

    async def reconcile(self, key: str) -> Result:
        project = self._projects.get(key)
        if project is None or project.metadata.HasField("deletion_timestamp"):
            return Result()  # gone, or already being deleted
        ttl = await self._ttl(project)
        if ttl is None:
            return Result()
        remaining = seconds(project.metadata.creation_timestamp) + ttl - self._clock.now()
        if remaining > 0:
            return Result(requeue_after=remaining)
        await self._delete(project)
        return Result()

    async def _ttl(self, project: v1.Project) -> float | None:
        """The project's TTL in seconds; None without the annotation; TerminalError when it cannot be read."""
        text = project.metadata.annotations.get(TTL_ANNOTATION)
        if text is None:
            return None
        try:
            return parse_duration(text)
        except ValueError as exc:
            await self._recorder.warning(project, "InvalidTTL", f"annotation {TTL_ANNOTATION}: {exc}")
            raise TerminalError(f"project {project.metadata.name}: {exc}") from exc

    async def _delete(self, project: v1.Project) -> None:
        """Delete the project as we saw it (a newer version → Conflict → the reconcile is retried on it)."""
        name = meta.key_of(project)  # "namespace/name": the project of that namespace, not another of its name
        try:
            await self._client.projects.delete(name, resource_version=project.metadata.resource_version)
        except NotFound:
            return
        ttl = project.metadata.annotations[TTL_ANNOTATION]
        await self._recorder.normal(project, "TTLExpired", f"TTL {ttl} after creation expired; deleting the project")
        log.info("deleted expired project", project=name, ttl=ttl)


def build(
    client: Client,
    *,
    clock: Clock | None = None,
    metrics_port: int | None = None,
    leader_election: LeaderElectionConfig | None = None,
    workers: int = 2,
) -> Manager:
    """The manager with the TTL controller wired in: one project informer, one controller, events."""
    clock = clock or SystemClock()
    manager = Manager(client, clock=clock, metrics_port=metrics_port, leader_election=leader_election)
    projects = manager.informers.informer(v1.Project)
    recorder = EventRecorder(client, component=COMPONENT, clock=clock)
    reconciler = TTLReconciler(client, projects.cache, recorder, clock=clock)
    controller = Controller("ttl", reconciler, max_concurrent_reconciles=workers, clock=clock)
    controller.watch(projects, enqueue_object)  # a project change → reconcile that project
    manager.add(controller)
    return manager


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Delete projects whose caravanserai.io/ttl annotation has expired.")
    p.add_argument("--server", default=None, help="API address (default $CARA_SERVER or 127.0.0.1:7420)")
    p.add_argument("--metrics-port", type=int, default=8081, help="port of /metrics, /healthz, /readyz (0: any)")
    p.add_argument("--leader-elect", action="store_true", help="run only while holding the lease")
    p.add_argument("--lease-name", default=COMPONENT, help="name of the leader election lease")
    p.add_argument("--workers", type=int, default=2, help="concurrent reconciles")
    p.add_argument("--log-level", default="info")
    return p


async def _run(args: argparse.Namespace) -> None:
    election = LeaderElectionConfig(name=args.lease_name) if args.leader_elect else None
    async with Client(args.server) as client:
        manager = build(client, metrics_port=args.metrics_port, leader_election=election, workers=args.workers)
        manager.install_signal_handlers()  # SIGTERM: drain, release the lease, exit 0
        await manager.run()


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
