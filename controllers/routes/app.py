"""Wiring of the routes controller into a Manager (`cara-controller-manager --controllers routes`).

Keys are project keys ("namespace/name"; a Route has its project's key), from: every change of a project that
declares (or declared) an ingress; every Route change (a Route deleted or edited by hand is put back); a Node
whose ingress endpoint changed (its address, addresses or ingress port: the projects bound to it or handed over
from it). A node's heartbeat, which changes none of these, enqueues nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, HandlerFactory, Manager, enqueue_mapped
from caravanserai.controllers.routes.reconciler import RouteReconciler
from caravanserai.informer import CacheReader, EventHandler, Informer
from caravanserai.project import routing
from caravanserai.workqueue import WorkQueue

NAME = "routes"
DEFAULT_RECONCILE_WORKERS = 2
ROUTED_NODES_INDEX = "routes.nodes"
"""Projects by the nodes their Route names (`status.nodeRef` and a hand-off's `status.previousNodeRef`)."""


@dataclass(frozen=True, slots=True)
class RouteOptions:
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("routes")
    group.add_argument("--routes-workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="concurrent reconciles")


def options_from_args(opts: argparse.Namespace) -> RouteOptions:
    return RouteOptions(reconcile_workers=opts.routes_workers)


def routed_nodes(project: Any) -> Iterable[str]:
    """The nodes the Route of `project` names (the `ROUTED_NODES_INDEX` function)."""
    status = project.status
    return [n for n in {status.node_ref, status.previous_node_ref} if n]


def routed_key(project: Any) -> Iterable[str]:
    """The project's key when it declares an ingress (for an update, the old state is mapped too)."""
    return [meta.key_of(project)] if project is not None and project.spec.ingress else []


def route_key(route: Any) -> Iterable[str]:
    return [meta.key_of(route)]


def node_changes(projects: CacheReader[v1.Project]) -> HandlerFactory:
    """Enqueue the projects a Node's Routes name when its ingress endpoint appears, changes or goes."""

    def factory(queue: WorkQueue[str]) -> EventHandler[Any]:
        def enqueue(node: v1.Node) -> None:
            for project in projects.by_index(ROUTED_NODES_INDEX, node.metadata.name):
                if project.spec.ingress:
                    queue.add(meta.key_of(project))

        def on_update(old: v1.Node, new: v1.Node) -> None:
            name = new.metadata.name
            if routing.endpoint(name, lambda _: old) != routing.endpoint(name, lambda _: new):
                enqueue(new)

        return EventHandler(enqueue, on_update, enqueue, name="routes-node-endpoints")

    return factory


def setup(manager: Manager, client: Client, clock: Clock, options: RouteOptions = RouteOptions()) -> Controller:
    """Add the routes controller to `manager`; returns its controller."""
    projects: Informer[v1.Project] = manager.informers.informer(v1.Project)
    projects.add_indexers({ROUTED_NODES_INDEX: routed_nodes})
    nodes: Informer[v1.Node] = manager.informers.informer(v1.Node)
    routes: Informer[v1.Route] = manager.informers.informer(v1.Route)
    reconciler = RouteReconciler(client, projects.cache, nodes.cache, routes.cache)
    controller = Controller(NAME, reconciler, max_concurrent_reconciles=options.reconcile_workers, clock=clock)
    controller.watch(projects, enqueue_mapped(routed_key))
    controller.watch(routes, enqueue_mapped(route_key))
    controller.watch(nodes, node_changes(projects.cache))
    manager.add(controller)
    return controller


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> Controller:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "NAME",
    "ROUTED_NODES_INDEX",
    "RouteOptions",
    "add_arguments",
    "node_changes",
    "options_from_args",
    "route_key",
    "routed_key",
    "routed_nodes",
    "setup",
    "setup_from_args",
]
