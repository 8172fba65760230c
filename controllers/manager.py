"""cara-controller-manager: the scheduler, node health, the garbage collector, placement upkeep, ProjectSets, the
quota queue and the routes in one process.

    cara-controller-manager [--controllers scheduler,node-health,gc,placement,projectset,queue,routes]
                            [--server HOST:PORT]
                            [--no-leader-elect]

A convenience for small clusters (`cara up` runs it): one process, one Manager, one set of shared informers and
one leader election (Lease `cara-controller-manager`), so the replicas of the combined process take turns as a
whole. Every flag of the controllers is accepted; the ones they share (`--heartbeat-timeout`) mean the
same for both.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.nodehealth import app as nodehealth_app
from caravanserai.controllers.placement import app as placement_app
from caravanserai.controllers.process import process_parser, run_process
from caravanserai.controllers.projectset import app as projectset_app
from caravanserai.controllers.queue import app as queue_app
from caravanserai.controllers.routes import app as routes_app
from caravanserai.controllers.scheduler import app as scheduler_app

LEASE = "cara-controller-manager"
METRICS_PORT = 10257

SETUPS: dict[str, Callable[[Manager, Client, Clock, argparse.Namespace], Any]] = {
    scheduler_app.NAME: scheduler_app.setup_from_args,
    nodehealth_app.NAME: nodehealth_app.setup_from_args,
    gc_app.NAME: gc_app.setup_from_args,
    placement_app.NAME: placement_app.setup_from_args,
    projectset_app.NAME: projectset_app.setup_from_args,
    queue_app.NAME: queue_app.setup_from_args,
    routes_app.NAME: routes_app.setup_from_args,
}
"""Every controller this process can run, by the name `--controllers` uses."""


def controller_list(text: str) -> list[str]:
    """`--controllers`: a comma list of known names (`*` or `all` for every one), in the order given."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if names in (["*"], ["all"]):
        return list(SETUPS)
    unknown = [name for name in names if name not in SETUPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown controller(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(SETUPS)}"
        )
    return list(dict.fromkeys(names))


def parser() -> argparse.ArgumentParser:
    p = process_parser(
        "cara-controller-manager", description=__doc__.splitlines()[0], lease=LEASE, metrics_port=METRICS_PORT
    )
    p.add_argument(
        "--controllers",
        type=controller_list,
        default=list(SETUPS),
        help=f"comma-separated controllers to run (default: {','.join(SETUPS)})",
    )
    for app in (scheduler_app, nodehealth_app, gc_app, placement_app, projectset_app, queue_app, routes_app):
        app.add_arguments(p)
    return p


def setup(manager: Manager, client: Client, clock: Clock, opts: argparse.Namespace) -> None:
    """Add the controllers named by `--controllers` to `manager`."""
    for name in opts.controllers:
        SETUPS[name](manager, client, clock, opts)


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run_process(parser(), setup, argv))


__all__ = ["LEASE", "METRICS_PORT", "SETUPS", "controller_list", "main", "parser", "setup"]

if __name__ == "__main__":
    main()
