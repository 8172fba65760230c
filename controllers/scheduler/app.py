"""Wiring of the scheduler into a Manager, shared by `cara-scheduler` and `cara-controller-manager`.

Informers: all projects (indexed by phase: the Pending ones are woken; the bound ones fill the per-node sums and
preemption's index of who runs where, `preemption/index.py`),

all nodes, all leases. The state handlers are registered on the informers before the controller's own handler,
so the state is current when keys are added. The controller runs `--scheduler-workers` concurrent reconciles: decisions
are made one at a time (each without awaiting), the binding writes overlap. A second controller,
`scheduler-events`, writes each binding's Scheduled event after it (`boundevents.py`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, EventRecorder, HandlerFactory, Manager
from caravanserai.controllers.process import duration, identity
from caravanserai.controllers.scheduler.algorithm import Policy
from caravanserai.controllers.scheduler.boundevents import EVENT_RECONCILE_WORKERS, BoundEvents
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.filters import DEFAULT_HEARTBEAT_TIMEOUT
from caravanserai.controllers.scheduler.handlers import SchedulerHandlers
from caravanserai.controllers.scheduler.preemption.budgets import Budgets
from caravanserai.controllers.scheduler.preemption.index import BoundProjects
from caravanserai.controllers.scheduler.preemption.preemptor import Preemptor
from caravanserai.controllers.scheduler.reconciler import SchedulerConfig, SchedulerReconciler
from caravanserai.controllers.scheduler.scores import SPREAD, STRATEGIES
from caravanserai.informer import PHASE_INDEXERS, EventHandler
from caravanserai.project.replicas import SET_INDEX, set_index
from caravanserai.workqueue import WorkQueue

NAME = "scheduler"
EVENTS_NAME = "scheduler-events"
COMPONENT = "cara-scheduler"
DEFAULT_RECONCILE_WORKERS = 16


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """What the flags configure."""

    config: SchedulerConfig = SchedulerConfig()
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS
    identity: str = ""


@dataclass(frozen=True, slots=True)
class Scheduler:
    """The parts of a wired scheduler (tests and benchmarks look at the reconciler's counters)."""

    controller: Controller
    reconciler: SchedulerReconciler
    state: ClusterState
    events: Controller


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scheduler")
    group.add_argument("--strategy", choices=STRATEGIES, default=SPREAD, help="spread (least allocated) or binpack")
    group.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        default=0,
        help="percent of the nodes to find feasible before choosing, never fewer than 100 nodes "
        "(default 0: adaptive as kube-scheduler, 50 - N/125 percent, at least 5)",
    )
    group.add_argument(
        "--heartbeat-timeout",
        type=duration(1.0),
        default=DEFAULT_HEARTBEAT_TIMEOUT,
        metavar="DURATION",
        help="a node is Ready while its Lease was renewed this recently (default 90s)",
    )
    group.add_argument(
        "--scheduler-workers",
        type=int,
        default=DEFAULT_RECONCILE_WORKERS,
        help="concurrent reconciles (binds in flight)",
    )


def options_from_args(opts: argparse.Namespace) -> SchedulerOptions:
    policy = Policy(strategy=opts.strategy, percentage_of_nodes_to_score=opts.percentage_of_nodes_to_score)
    config = SchedulerConfig(policy=policy, heartbeat_timeout=opts.heartbeat_timeout)
    return SchedulerOptions(config=config, reconcile_workers=opts.scheduler_workers, identity=identity(opts))


def _wake_on_add(reconciler: SchedulerReconciler) -> HandlerFactory:
    """The controller's own handler: on (re)start it is called for every cached project (level-based)."""

    def factory(queue: WorkQueue[str]) -> EventHandler[v1.Project]:
        return EventHandler(on_add=reconciler.wake, name="scheduler-wake")

    return factory


def setup(manager: Manager, client: Client, clock: Clock, options: SchedulerOptions = SchedulerOptions()) -> Scheduler:
    """Add the scheduler to `manager`; returns its parts."""
    projects = manager.informers.informer(v1.Project, indexers={**PHASE_INDEXERS, SET_INDEX: set_index})
    nodes = manager.informers.informer(v1.Node)
    leases = manager.informers.informer(v1.Lease)
    state = ClusterState()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    recorder = EventRecorder(client, component=COMPONENT, host=options.identity, clock=clock)
    event_queue: WorkQueue[str] = WorkQueue(clock=clock)
    bound_events = BoundEvents(recorder, event_queue)
    bound = BoundProjects()
    sets = manager.informers.informer(v1.ProjectSet)
    budgets = Budgets(sets.cache, projects.cache, clock=clock)
    preemptor = Preemptor(client, state, bound, recorder, clock=clock, budgets=budgets)
    reconciler = SchedulerReconciler(
        client,
        projects.cache,
        state,
        queue,
        recorder,
        clock=clock,
        config=options.config,
        bound_events=bound_events,
        leading=lambda: manager.leading,
        preemptor=preemptor,
    )
    handlers = SchedulerHandlers(reconciler, state, clock=clock)
    nodes.add_event_handler(handlers.nodes())
    leases.add_event_handler(handlers.leases())
    projects.add_event_handler(bound.handler())
    projects.add_event_handler(handlers.projects())
    controller = Controller(NAME, reconciler, queue, max_concurrent_reconciles=options.reconcile_workers, clock=clock)
    controller.watch(projects, _wake_on_add(reconciler))
    manager.add(controller)
    events = Controller(
        EVENTS_NAME, bound_events, event_queue, max_concurrent_reconciles=EVENT_RECONCILE_WORKERS, clock=clock
    )
    manager.add(events)
    return Scheduler(controller, reconciler, state, events)


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> Scheduler:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "COMPONENT",
    "DEFAULT_RECONCILE_WORKERS",
    "EVENTS_NAME",
    "NAME",
    "Scheduler",
    "SchedulerOptions",
    "add_arguments",
    "options_from_args",
    "setup",
    "setup_from_args",
]
