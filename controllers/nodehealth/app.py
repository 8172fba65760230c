"""Wiring of node health into a Manager, shared by `cara-node-health` and `cara-controller-manager`.

Keys are node names. They come from: every node change; a Lease change of a node not known Ready (a renewal
brings it back at once); a change of a project bound to a node not known Ready, or carrying NotReadyAt. A Ready
node needs no events at all: each reconcile requeues it for its heartbeat deadline.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, EventRecorder, Manager, enqueue_mapped
from caravanserai.controllers.nodehealth.policy import (
    DEFAULT_GRACE_PERIOD,
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_STARTUP_GRACE_PERIOD,
    DEFAULT_TERMINATING_TIMEOUT,
    DEFAULT_UNHEALTHY_THRESHOLD,
    HealthConfig,
)
from caravanserai.controllers.nodehealth.reconciler import NodeHealthReconciler
from caravanserai.controllers.process import duration, identity
from caravanserai.informer import NODE_REF_INDEXERS, CacheReader

NAME = "node-health"
COMPONENT = "cara-node-health"
DEFAULT_RECONCILE_WORKERS = 4
MIN_DURATION = 1.0


@dataclass(frozen=True, slots=True)
class NodeHealthOptions:
    config: HealthConfig = HealthConfig()
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS
    identity: str = ""


class NodeHealthController(Controller):
    """A Controller that starts its reconciler's start-up grace each time it starts running (leading)."""

    def __init__(self, reconciler: NodeHealthReconciler, *, reconcile_workers: int, clock: Clock) -> None:
        super().__init__(NAME, reconciler, max_concurrent_reconciles=reconcile_workers, clock=clock)
        self.health = reconciler

    async def run(self) -> None:
        self.health.start()
        await super().run()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("node health")
    at_least = duration(MIN_DURATION)
    group.add_argument(
        "--heartbeat-timeout",
        type=at_least,
        default=DEFAULT_HEARTBEAT_TIMEOUT,
        metavar="DURATION",
        help="NotReady after no Lease renewal for this long (default 90s; 90, 90s, 3m … from 1s)",
    )
    group.add_argument(
        "--grace-period",
        type=at_least,
        default=DEFAULT_GRACE_PERIOD,
        metavar="DURATION",
        help="Running projects on a NotReady node return to Pending after this (default 3m)",
    )
    group.add_argument(
        "--terminating-timeout",
        type=at_least,
        default=DEFAULT_TERMINATING_TIMEOUT,
        metavar="DURATION",
        help="Terminating projects on a NotReady node are marked Terminated after this (default 10m)",
    )
    group.add_argument(
        "--startup-grace-period",
        type=at_least,
        default=DEFAULT_STARTUP_GRACE_PERIOD,
        metavar="DURATION",
        help="no evictions for this long after the controller starts or takes over (default 60s)",
    )
    group.add_argument(
        "--unhealthy-threshold",
        type=float,
        default=DEFAULT_UNHEALTHY_THRESHOLD,
        help="evictions stop while more than this share of nodes is NotReady (default 0.55)",
    )
    group.add_argument(
        "--node-health-workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="concurrent reconciles"
    )


def options_from_args(opts: argparse.Namespace) -> NodeHealthOptions:
    config = HealthConfig(
        heartbeat_timeout=opts.heartbeat_timeout,
        grace_period=opts.grace_period,
        terminating_timeout=opts.terminating_timeout,
        startup_grace_period=opts.startup_grace_period,
        unhealthy_threshold=opts.unhealthy_threshold,
    )
    return NodeHealthOptions(config=config, reconcile_workers=opts.node_health_workers, identity=identity(opts))


def _not_known_ready(nodes: CacheReader[v1.Node], name: str) -> bool:
    node = nodes.get(name)
    return node is not None and node.status.state != v1.NODE_READY


def lease_to_node(nodes: CacheReader[v1.Node]) -> Callable[[v1.Lease], list[str]]:
    """A Lease change concerns its node when that node is not known to be Ready."""

    def keys(lease: v1.Lease) -> list[str]:
        name = lease.metadata.name
        return [name] if _not_known_ready(nodes, name) else []

    return keys


def project_to_node(nodes: CacheReader[v1.Node]) -> Callable[[v1.Project], list[str]]:
    """A project change concerns its node when the node is not known Ready or the project has NotReadyAt."""

    def keys(project: v1.Project) -> list[str]:
        node = project.status.node_ref
        if not node:
            return []
        stamped = meta.get_condition(project.status.conditions, v1.CONDITION_NOT_READY_AT) is not None
        return [node] if stamped or _not_known_ready(nodes, node) else []

    return keys


def setup(
    manager: Manager, client: Client, clock: Clock, options: NodeHealthOptions = NodeHealthOptions()
) -> NodeHealthController:
    """Add node health to `manager`; returns its controller (`.health` is the reconciler)."""
    nodes = manager.informers.informer(v1.Node)
    leases = manager.informers.informer(v1.Lease)
    projects = manager.informers.informer(v1.Project, indexers=NODE_REF_INDEXERS)
    recorder = EventRecorder(client, component=COMPONENT, host=options.identity, clock=clock)
    reconciler = NodeHealthReconciler(
        client, nodes.cache, leases.cache, projects.cache, recorder, clock=clock, config=options.config
    )
    controller = NodeHealthController(reconciler, reconcile_workers=options.reconcile_workers, clock=clock)
    controller.watch(nodes)
    controller.watch(leases, enqueue_mapped(lease_to_node(nodes.cache)))
    controller.watch(projects, enqueue_mapped(project_to_node(nodes.cache)))
    manager.add(controller)
    return controller


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> NodeHealthController:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "COMPONENT",
    "NAME",
    "NodeHealthController",
    "NodeHealthOptions",
    "add_arguments",
    "lease_to_node",
    "options_from_args",
    "project_to_node",
    "setup",
    "setup_from_args",
]
