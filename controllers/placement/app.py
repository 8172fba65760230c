"""Wiring of placement upkeep into a Manager (`cara-controller-manager --controllers placement`).

Keys are project keys ("namespace/name"), from: every project change; a node change (every project bound to it: a
taint or a label may have changed).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, EventRecorder, HandlerFactory, Manager, enqueue_matching
from caravanserai.controllers.placement.reconciler import PlacementReconciler
from caravanserai.controllers.process import duration, identity
from caravanserai.informer import NODE_REF_INDEX, NODE_REF_INDEXERS, CacheReader, EventHandler
from caravanserai.project.lifecycle import DEFAULT_HANDOFF
from caravanserai.text.durations import format_duration
from caravanserai.workqueue import WorkQueue

NAME = "placement"
COMPONENT = "cara-placement"
DEFAULT_RECONCILE_WORKERS = 2


@dataclass(frozen=True, slots=True)
class PlacementOptions:
    handoff_timeout: float = DEFAULT_HANDOFF
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS
    identity: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    controller: Controller
    reconciler: PlacementReconciler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("placement")
    group.add_argument(
        "--handoff-timeout",
        type=duration(),
        default=DEFAULT_HANDOFF,
        metavar="DURATION",
        help="a project evicted by a NoExecute taint keeps its old containers at most this long while it starts "
        f"elsewhere (default {format_duration(DEFAULT_HANDOFF)})",
    )
    group.add_argument("--placement-workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="concurrent reconciles")


def options_from_args(opts: argparse.Namespace) -> PlacementOptions:
    return PlacementOptions(opts.handoff_timeout, reconcile_workers=opts.placement_workers, identity=identity(opts))


def projects_of_changed_node(projects: CacheReader[v1.Project]) -> HandlerFactory:
    """A node added or changed → the projects bound to it."""

    def factory(queue: WorkQueue[str]) -> EventHandler[v1.Node]:
        def on_change(node: v1.Node) -> None:
            for project in projects.by_index(NODE_REF_INDEX, node.metadata.name):
                queue.add(meta.key_of(project))

        return EventHandler(on_add=on_change, on_update=lambda old, new: on_change(new), name="placement-node")

    return factory


def concerned(project: v1.Project) -> bool:
    """Projects placement upkeep may act on: bound ones, and finished ones."""
    return project.status.phase in (v1.SCHEDULED, v1.RUNNING, v1.SUCCEEDED, v1.FAILED)


def setup(manager: Manager, client: Client, clock: Clock, options: PlacementOptions = PlacementOptions()) -> Placement:
    """Add placement upkeep to `manager`; returns its parts."""
    projects = manager.informers.informer(v1.Project, indexers=NODE_REF_INDEXERS)
    nodes = manager.informers.informer(v1.Node)
    recorder = EventRecorder(client, component=COMPONENT, host=options.identity, clock=clock)
    reconciler = PlacementReconciler(
        client, projects.cache, nodes.cache, recorder, clock=clock, handoff_timeout=options.handoff_timeout
    )
    controller = Controller(NAME, reconciler, max_concurrent_reconciles=options.reconcile_workers, clock=clock)
    controller.watch(projects, enqueue_matching(concerned))
    controller.watch(nodes, projects_of_changed_node(projects.cache))
    manager.add(controller)
    return Placement(controller, reconciler)


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> Placement:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "COMPONENT",
    "NAME",
    "Placement",
    "PlacementOptions",
    "add_arguments",
    "concerned",
    "options_from_args",
    "projects_of_changed_node",
    "setup",
    "setup_from_args",
]
