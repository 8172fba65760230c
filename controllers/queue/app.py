"""Wiring of the quota queue into a Manager (`cara-controller-manager --controllers queue`).

Keys are namespaces, from: every ResourceQuota change; every project change that may change what its namespace
holds or waits for (a project entering, leaving or in phase Queued, or entering or leaving a counted phase).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, Manager, enqueue_mapped
from caravanserai.controllers.queue.reconciler import QueueReconciler
from caravanserai.project import quota

NAME = "queue"
DEFAULT_RECONCILE_WORKERS = 2


@dataclass(frozen=True, slots=True)
class QueueOptions:
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("queue")
    group.add_argument("--queue-workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="concurrent reconciles")


def options_from_args(opts: argparse.Namespace) -> QueueOptions:
    return QueueOptions(reconcile_workers=opts.queue_workers)


def namespace_of(obj: Any) -> Iterable[str]:
    return [obj.metadata.namespace] if obj is not None and obj.metadata.namespace else []


def affected_namespace(project: Any) -> Iterable[str]:
    """The project's namespace when its phase bears on its quota's queue (queued, or not counted: done)."""
    if project is None or (project.status.phase != v1.QUEUED and quota.counted(project)):
        return []
    return namespace_of(project)


def setup(manager: Manager, client: Client, clock: Clock, options: QueueOptions = QueueOptions()) -> Controller:
    """Add the quota queue to `manager`; returns its controller."""
    projects = manager.informers.informer(v1.Project)
    quotas = manager.informers.informer(v1.ResourceQuota)
    controller = Controller(
        NAME, QueueReconciler(client, clock=clock), max_concurrent_reconciles=options.reconcile_workers, clock=clock
    )
    controller.watch(quotas, enqueue_mapped(namespace_of))
    controller.watch(projects, enqueue_mapped(affected_namespace))
    manager.add(controller)
    return controller


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> Controller:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "NAME",
    "QueueOptions",
    "add_arguments",
    "affected_namespace",
    "namespace_of",
    "options_from_args",
    "setup",
    "setup_from_args",
]
