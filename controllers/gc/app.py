"""Wiring of the garbage collector into a Manager, shared by `cara-gc` and `cara-controller-manager`.

Three controllers:

* `gc` (projects): keys are project keys ("namespace/name"), from a project change that may concern the collector
  (Terminated, with expire_at, or bound to a node the cache does not know) and a node deletion (every project
  bound to it).
* `gc-owners` (every kind: `owners.OwnerCollector`): one key, queued by any change of an object of a kind it
  follows (informers on every built-in kind but events and leases, and on every custom kind) and `--owner-resync`
  seconds after each sweep.
* `gc-namespaces` (namespaces: `namespaces.NamespaceReconciler`): keys are namespace names, from every namespace
  change and the deletion of a project in a Terminating namespace; empties a namespace being deleted, then has the
  apiserver remove it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, EventRecorder, HandlerFactory, Manager, enqueue_matching
from caravanserai.controllers.gc.namespaces import NamespaceReconciler, namespace_of_deleted_project
from caravanserai.controllers.gc.owners import DEFAULT_OWNER_RESYNC, OwnerCollector
from caravanserai.controllers.gc.policy import DEFAULT_TERMINATED_DELAY, GCConfig, is_candidate
from caravanserai.controllers.gc.reconciler import GCReconciler
from caravanserai.controllers.process import duration, identity
from caravanserai.informer import NODE_REF_INDEX, NODE_REF_INDEXERS, CacheReader, EventHandler
from caravanserai.workqueue import WorkQueue

NAME = "gc"
OWNERS_NAME = "gc-owners"
NAMESPACES_NAME = "gc-namespaces"
COMPONENT = "cara-gc"
DEFAULT_RECONCILE_WORKERS = 4


@dataclass(frozen=True, slots=True)
class GCOptions:
    config: GCConfig = GCConfig()
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS
    identity: str = ""
    owner_resync: float = DEFAULT_OWNER_RESYNC


@dataclass(frozen=True, slots=True)
class GarbageCollector:
    controller: Controller
    reconciler: GCReconciler
    owners_controller: Controller
    owners: OwnerCollector
    namespaces_controller: Controller
    namespaces: NamespaceReconciler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("garbage collection")
    group.add_argument(
        "--terminated-delay",
        type=duration(),
        default=DEFAULT_TERMINATED_DELAY,
        metavar="DURATION",
        help="delete Terminated projects this long after they finished (default 5s)",
    )
    group.add_argument(
        "--succeeded-ttl",
        type=duration(),
        default=None,
        metavar="DURATION",
        help="delete Succeeded projects this long after they succeeded (default: keep them until deleted)",
    )
    group.add_argument("--gc-workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="concurrent reconciles")
    group.add_argument(
        "--owner-resync",
        type=duration(0.1),
        default=DEFAULT_OWNER_RESYNC,
        metavar="DURATION",
        help="sweep every kind for dependents of deleted owners at least this often (default 30s; any change of "
        "an object starts a sweep at once)",
    )


def options_from_args(opts: argparse.Namespace) -> GCOptions:
    config = GCConfig(terminated_delay=opts.terminated_delay, succeeded_ttl=opts.succeeded_ttl)
    return GCOptions(config, reconcile_workers=opts.gc_workers, identity=identity(opts), owner_resync=opts.owner_resync)


def candidates(nodes: CacheReader[v1.Node]) -> Callable[[Any], bool]:
    """Projects the collector may have to act on (see `policy.is_candidate`)."""

    def predicate(project: v1.Project) -> bool:
        return is_candidate(project, node_known=nodes.get(project.status.node_ref) is not None)

    return predicate


def projects_of_deleted_node(projects: CacheReader[v1.Project]) -> HandlerFactory:
    """A node deletion → the projects bound to it."""

    def factory(queue: WorkQueue[str]) -> EventHandler[v1.Node]:
        def on_delete(node: v1.Node) -> None:
            for project in projects.by_index(NODE_REF_INDEX, node.metadata.name):
                queue.add(meta.key_of(project))

        return EventHandler(on_delete=on_delete, name="gc-node-deleted")

    return factory


def setup(manager: Manager, client: Client, clock: Clock, options: GCOptions = GCOptions()) -> GarbageCollector:
    """Add the garbage collector to `manager`; returns its parts."""
    projects = manager.informers.informer(v1.Project, indexers=NODE_REF_INDEXERS)
    nodes = manager.informers.informer(v1.Node)
    recorder = EventRecorder(client, component=COMPONENT, host=options.identity, clock=clock)
    reconciler = GCReconciler(client, projects.cache, nodes.cache, recorder, clock=clock, config=options.config)
    controller = Controller(NAME, reconciler, max_concurrent_reconciles=options.reconcile_workers, clock=clock)
    controller.watch(projects, enqueue_matching(candidates(nodes.cache)))
    controller.watch(nodes, projects_of_deleted_node(projects.cache))
    manager.add(controller)
    owners = OwnerCollector(client, manager.informers, resync=options.owner_resync)
    owners_controller = Controller(OWNERS_NAME, owners, clock=clock)
    owners.attach(owners_controller)
    manager.add(owners_controller)
    namespaces = manager.informers.informer(v1.Namespace)
    emptier = NamespaceReconciler(client, namespaces.cache, clock=clock)
    namespaces_controller = Controller(NAMESPACES_NAME, emptier, clock=clock)
    namespaces_controller.watch(namespaces)
    namespaces_controller.watch(projects, namespace_of_deleted_project(namespaces.cache))
    manager.add(namespaces_controller)
    return GarbageCollector(controller, reconciler, owners_controller, owners, namespaces_controller, emptier)


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> GarbageCollector:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "COMPONENT",
    "GCOptions",
    "GarbageCollector",
    "NAME",
    "NAMESPACES_NAME",
    "OWNERS_NAME",
    "add_arguments",
    "candidates",
    "options_from_args",
    "projects_of_deleted_node",
    "setup",
    "setup_from_args",
]
