"""Wiring of the ProjectSet controller into a Manager (`cara-controller-manager --controllers projectset`).

Keys are set keys ("namespace/name"), from: every set change; every change of a project a set controls (its
owner's name in the project's namespace).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Controller, EventRecorder, Manager, enqueue_mapped
from caravanserai.controllers.process import identity
from caravanserai.controllers.projectset.reconciler import SET_INDEX, ProjectSetReconciler, set_index

NAME = "projectset"
COMPONENT = "cara-projectset"
DEFAULT_RECONCILE_WORKERS = 2


@dataclass(frozen=True, slots=True)
class ProjectSetOptions:
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS
    identity: str = ""


@dataclass(frozen=True, slots=True)
class ProjectSets:
    controller: Controller
    reconciler: ProjectSetReconciler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("projectset")
    group.add_argument(
        "--projectset-workers", type=int, default=DEFAULT_RECONCILE_WORKERS, help="concurrent reconciles"
    )


def options_from_args(opts: argparse.Namespace) -> ProjectSetOptions:
    return ProjectSetOptions(reconcile_workers=opts.projectset_workers, identity=identity(opts))


def setup(
    manager: Manager, client: Client, clock: Clock, options: ProjectSetOptions = ProjectSetOptions()
) -> ProjectSets:
    """Add the ProjectSet controller to `manager`; returns its parts."""
    projects = manager.informers.informer(v1.Project, indexers={SET_INDEX: set_index})
    sets = manager.informers.informer(v1.ProjectSet)
    recorder = EventRecorder(client, component=COMPONENT, host=options.identity, clock=clock)
    reconciler = ProjectSetReconciler(client, sets.cache, projects.cache, recorder, clock=clock)
    controller = Controller(NAME, reconciler, max_concurrent_reconciles=options.reconcile_workers, clock=clock)
    controller.watch(sets)
    controller.watch(projects, enqueue_mapped(set_index))
    manager.add(controller)
    return ProjectSets(controller, reconciler)


def setup_from_args(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> ProjectSets:
    return setup(manager, client, clock, options_from_args(opts))


__all__ = [
    "COMPONENT",
    "NAME",
    "ProjectSetOptions",
    "ProjectSets",
    "add_arguments",
    "options_from_args",
    "setup",
    "setup_from_args",
]
