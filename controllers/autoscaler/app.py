"""Wiring of the autoscaler into a Manager (`cara-autoscaler`).

Informers: node groups, nodes, leases, projects; the last three keep the autoscaler's `ClusterView` up to date
by their events. One controller, `autoscaler`, with one key (`reconciler.KEY`):
queued by every change of a group or a node, by a project that becomes unschedulable or leaves a node, and
`--scan-interval` after each pass.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, EventRecorder, HandlerFactory, Manager, enqueue_mapped
from caravanserai.controllers.autoscaler.expanders import EXPANDERS, LEAST_WASTE
from caravanserai.controllers.autoscaler.reconciler import KEY, AutoscalerConfig, AutoscalerReconciler
from caravanserai.controllers.autoscaler.snapshot import is_unschedulable
from caravanserai.controllers.autoscaler.view import ClusterView
from caravanserai.controllers.process import duration, identity
from caravanserai.controllers.scheduler.filters import DEFAULT_HEARTBEAT_TIMEOUT
from caravanserai.project.lifecycle import DEFAULT_HANDOFF
from caravanserai.text.durations import format_duration

NAME = "autoscaler"
COMPONENT = "cara-autoscaler"
_DEFAULTS = AutoscalerConfig()


@dataclass(frozen=True, slots=True)
class AutoscalerOptions:
    config: AutoscalerConfig = AutoscalerConfig()
    identity: str = ""
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class Autoscaler:
    controller: Controller
    reconciler: AutoscalerReconciler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("autoscaler")
    group.add_argument("--expander", choices=EXPANDERS, default=LEAST_WASTE, help="how a scale-up picks its group")
    group.add_argument(
        "--scan-interval",
        type=duration(0.1),
        default=_DEFAULTS.scan_interval,
        metavar="DURATION",
        help=f"a pass at least this often (default {format_duration(_DEFAULTS.scan_interval)}; changes start one "
        "at once)",
    )
    group.add_argument(
        "--scale-up-backoff",
        type=duration(),
        default=_DEFAULTS.backoff,
        metavar="DURATION",
        help="a group whose provider failed or whose node never registered is not grown for this long",
    )
    group.add_argument(
        "--new-node-grace",
        type=duration(),
        default=_DEFAULTS.new_node_grace,
        metavar="DURATION",
        help="a node that registered this recently counts as room for Pending projects (the scheduler may not "
        "have used it yet)",
    )
    group.add_argument(
        "--handoff-timeout",
        type=duration(),
        default=DEFAULT_HANDOFF,
        metavar="DURATION",
        help="a project moved off a node being removed keeps its old containers at most this long",
    )
    group.add_argument(
        "--heartbeat-timeout",
        type=duration(1.0),
        default=DEFAULT_HEARTBEAT_TIMEOUT,
        metavar="DURATION",
        help="a node is Ready while its Lease was renewed this recently (as the scheduler's flag)",
    )
    group.add_argument(
        "--provider-list-interval",
        type=duration(0.1),
        default=_DEFAULTS.provider_list_interval,
        metavar="DURATION",
        help="how often each group's provider is asked which machines it has, to report those the cluster does "
        f"not know (default {format_duration(_DEFAULTS.provider_list_interval)})",
    )
    group.add_argument("--seed", type=int, default=None, help="seed of the random expander (default: random)")


def options_from_args(opts: argparse.Namespace) -> AutoscalerOptions:
    config = AutoscalerConfig(
        expander=opts.expander,
        scan_interval=opts.scan_interval,
        backoff=opts.scale_up_backoff,
        new_node_grace=opts.new_node_grace,
        handoff_timeout=opts.handoff_timeout,
        heartbeat_timeout=opts.heartbeat_timeout,
        provider_list_interval=opts.provider_list_interval,
    )
    return AutoscalerOptions(config, identity=identity(opts), seed=opts.seed)


def _project_keys(project: v1.Project) -> list[str]:
    """A project matters when it waits for room, or occupies a node (its leaving frees room)."""
    return [KEY] if is_unschedulable(project) or project.status.node_ref else []


def _always(obj: object) -> list[str]:
    return [KEY]


def setup(
    manager: Manager, client: Client, clock: Clock, options: AutoscalerOptions = AutoscalerOptions()
) -> Autoscaler:
    """Add the autoscaler to `manager`; returns its parts."""
    groups = manager.informers.informer(
        "nodegroups"
    )  # Informer[Any]: the factory's typed overload lists the core kinds
    nodes = manager.informers.informer(v1.Node)
    leases = manager.informers.informer(v1.Lease)
    projects = manager.informers.informer(v1.Project)
    recorder = EventRecorder(client, component=COMPONENT, host=options.identity, clock=clock)
    view = ClusterView()
    view.follow(nodes, leases, projects)  # before the controller's handlers: a woken pass finds the change
    rng = random.Random(options.seed)
    reconciler = AutoscalerReconciler(client, groups.cache, view, recorder, clock=clock, config=options.config, rng=rng)
    controller = Controller(NAME, reconciler, clock=clock)
    wake: HandlerFactory = enqueue_mapped(_always)
    controller.watch(groups, wake)
    controller.watch(nodes, wake)
    controller.watch(projects, enqueue_mapped(_project_keys))
    manager.add(controller)
    return Autoscaler(controller, reconciler)


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> Autoscaler:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "COMPONENT",
    "NAME",
    "Autoscaler",
    "AutoscalerOptions",
    "add_arguments",
    "options_from_args",
    "setup",
    "setup_from_args",
]
