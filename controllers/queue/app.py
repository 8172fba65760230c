"""Wiring of the quota queue into a Manager (`cara-controller-manager --controllers queue`).

Keys are namespaces, or "cohort/<name>" for the namespaces whose quotas name a cohort, from: every ResourceQuota
change (its cohort, before and after, or its namespace); every project change that may change what its namespace
holds or waits for (a project entering, leaving or in phase Queued, or entering or leaving a counted phase), mapped
to its namespace's cohorts through the quota informer's namespace index (or to the namespace when it has none).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, Manager, enqueue_mapped
from caravanserai.controllers.queue.reconciler import QueueReconciler
from caravanserai.informer import Informer
from caravanserai.project import cohorts, quota

NAME = "queue"
NAMESPACE_INDEX = "queue:namespace"  # quotas by namespace (the index is the queue's own)
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


def queue_of_quota(q: Any) -> Iterable[str]:
    """The key of the queue a quota belongs to: its cohort's, or its namespace's."""
    if q is None:
        return []
    return [cohorts.cohort_key(q.spec.cohort)] if q.spec.cohort else namespace_of(q)


def affected_namespace(project: Any) -> Iterable[str]:
    """The project's namespace when its phase bears on its quota's queue (queued, or not counted: done)."""
    if project is None or (project.status.phase != v1.QUEUED and quota.counted(project)):
        return []
    return namespace_of(project)


def affected_queues(quotas: Informer[v1.ResourceQuota]) -> Callable[[Any], Iterable[str]]:
    """`affected_namespace`, mapped to the cohorts of the namespace's quotas (the namespace when none has one)."""

    def keys(project: Any) -> Iterable[str]:
        out: set[str] = set()
        for namespace in affected_namespace(project):
            found = {q.spec.cohort for q in quotas.by_index(NAMESPACE_INDEX, namespace) if q.spec.cohort}
            if found:
                out.update(cohorts.cohort_key(c) for c in found)
            else:
                out.add(namespace)
        return sorted(out)

    return keys


def setup(manager: Manager, client: Client, clock: Clock, options: QueueOptions = QueueOptions()) -> Controller:
    """Add the quota queue to `manager`; returns its controller."""
    projects = manager.informers.informer(v1.Project)
    quotas = manager.informers.informer(v1.ResourceQuota)
    controller = Controller(
        NAME, QueueReconciler(client, clock=clock), max_concurrent_reconciles=options.reconcile_workers, clock=clock
    )
    quotas.add_indexers({NAMESPACE_INDEX: namespace_of})
    controller.watch(quotas, enqueue_mapped(queue_of_quota))
    controller.watch(projects, enqueue_mapped(affected_queues(quotas)))
    manager.add(controller)
    return controller


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> Controller:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "NAME",
    "QueueOptions",
    "add_arguments",
    "affected_namespace",
    "affected_queues",
    "namespace_of",
    "options_from_args",
    "queue_of_quota",
    "setup",
    "setup_from_args",
]
