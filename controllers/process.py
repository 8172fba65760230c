"""What every controller process shares: its flags, logging, the API client and a `Manager` with leader election.

    parser = process_parser("cara-gc", description=..., lease="cara-gc", metrics_port=10253)
    gc_app.add_arguments(parser)
    sys.exit(run_process(parser, setup, argv))   # setup(manager, client, clock, opts) adds the controllers

Flags of every process: the connection flags of `caravanserai.client.options` (`--server`, default $CARA_SERVER
or 127.0.0.1:7420, TLS, token), `--leader-elect` (on by default; `--no-leader-elect` for a single replica),
`--leader-elect-lease`, `--leader-elect-identity` and the lease timings, `--metrics-host`/`--metrics-port`
(/healthz, /readyz, /metrics; 0 picks a free port, -1 serves nothing), `--log-level`, `--log-format`.

The process logs structured lines (JSON unless stderr is a terminal), stops cleanly on SIGTERM/SIGINT (queues
drained, lease released) and exits 1 with a one-line message when it cannot start. Once its caches are synced,
what they hold is kept out of the garbage collector's full passes (`freeze_when_synced`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from caravanserai.client import Client
from caravanserai.client.options import add_client_arguments, client_from_args
from caravanserai.clock import Clock, SystemClock
from caravanserai.controller import LeaderElectionConfig, Manager, default_identity
from caravanserai.errors import CaravanseraiError
from caravanserai.process.helpformat import DefaultsHelpFormatter
from caravanserai.process.logging import configure_logging
from caravanserai.process.shell import run_main, until_signalled
from caravanserai.text.durations import parse_duration

log = structlog.get_logger(__name__)

STARTUP_ERRORS = (CaravanseraiError, OSError, TimeoutError, ValueError)
"""Errors that end a controller process in one line: the API unreachable, caches not synced in time, bad flags."""

Setup = Callable[[Manager, Client, Clock, argparse.Namespace], Any]
"""Adds a process's controllers to its manager: `setup(manager, client, clock, opts)`."""


def duration(minimum: float = 0.0) -> Callable[[str], float]:
    """An argparse `type` for durations (`90`, `90s`, `3m`, `1h30m`) of at least `minimum` seconds."""

    def parse(text: str) -> float:
        value = parse_duration(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is shorter than the minimum of {minimum:g}s")
        return value

    parse.__name__ = "duration"
    return parse


def process_parser(prog: str, *, description: str, lease: str, metrics_port: int) -> argparse.ArgumentParser:
    """A parser with the flags every controller process has (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, conflict_handler="resolve", formatter_class=DefaultsHelpFormatter
    )
    add_client_arguments(parser)
    election = parser.add_argument_group("leader election")
    election.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run only while holding the lease, so one of several replicas acts (default: on)",
    )
    election.add_argument("--leader-elect-lease", default=lease, help=f"name of the Lease (default {lease})")
    election.add_argument("--leader-elect-identity", default="", help="this replica's name (default host_pid_random)")
    election.add_argument("--leader-elect-lease-duration", type=duration(1.0), default=15.0, metavar="DURATION")
    election.add_argument("--leader-elect-renew-deadline", type=duration(0.5), default=10.0, metavar="DURATION")
    election.add_argument("--leader-elect-retry-period", type=duration(0.1), default=2.0, metavar="DURATION")
    serving = parser.add_argument_group("serving")
    serving.add_argument("--metrics-host", default="127.0.0.1", help="address of /metrics, /healthz, /readyz")
    serving.add_argument(
        "--metrics-port", type=int, default=metrics_port, help=f"port of /metrics … (default {metrics_port}; -1: off)"
    )
    serving.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    serving.add_argument("--log-format", default="auto", choices=("auto", "json", "console"))
    return parser


def identity(opts: argparse.Namespace) -> str:
    """This replica's identity (leader election holder, event source host), fixed once per process."""
    if not opts.leader_elect_identity:
        opts.leader_elect_identity = default_identity()
    return str(opts.leader_elect_identity)


def new_manager(opts: argparse.Namespace, client: Client, clock: Clock, **kwargs: Any) -> Manager:
    """The Manager the flags describe (leader election on unless `--no-leader-elect`)."""
    election = None
    if opts.leader_elect:
        election = LeaderElectionConfig(
            name=opts.leader_elect_lease,
            identity=identity(opts),
            lease_duration=opts.leader_elect_lease_duration,
            renew_deadline=opts.leader_elect_renew_deadline,
            retry_period=opts.leader_elect_retry_period,
        )
    port = None if opts.metrics_port < 0 else opts.metrics_port
    return Manager(
        client, clock=clock, metrics_host=opts.metrics_host, metrics_port=port, leader_election=election, **kwargs
    )


async def serve(opts: argparse.Namespace, setup: Setup, *, clock: Clock | None = None) -> None:
    """Connect, build the manager and its controllers, and run until SIGTERM/SIGINT (then stop cleanly)."""
    clock = clock or SystemClock()
    async with client_from_args(opts) as client:
        manager = new_manager(opts, client, clock)
        setup(manager, client, clock, opts)
        log.info(
            "starting",
            server=client.target,
            controllers=[c.name for c in manager.controllers],
            leader_elect=opts.leader_elect,
            identity=identity(opts),
        )
        freezing = asyncio.create_task(freeze_when_synced(manager), name="freeze-when-synced")
        try:
            await until_signalled(manager.run(), stop=manager.stop)
        finally:
            freezing.cancel()
            await asyncio.gather(freezing, return_exceptions=True)


async def freeze_when_synced(manager: Manager) -> None:
    """Once the informer caches hold their first lists (delivered to the handlers, which build the controllers'
    own indexes from them), move every object alive then out of the cyclic garbage collector's reach
    (`gc.freeze`). A controller's caches are long-lived by design, and a full collection walking tens of thousands
    of cached objects stops the event loop for 100 ms or more (a scheduler's decisions with it); objects made
    later are collected as usual, and frozen ones are still freed when nothing refers to them."""
    await manager.informers.wait_synced()
    gc.freeze()
    log.debug("caches synced: their objects are out of the collector's passes", frozen=gc.get_freeze_count())


def run_process(parser: argparse.ArgumentParser, setup: Setup, argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, configure logging and serve; 0 once stopped by a signal (a start-up error exits 1 in one line,
    through `caravanserai.process.shell.run_main`)."""
    opts = parser.parse_args(argv)
    json = {"auto": None, "json": True, "console": False}[opts.log_format]
    configure_logging(opts.log_level, json=json)
    run_main(parser.prog, lambda: serve(opts, setup), errors=STARTUP_ERRORS)
    return 0


__all__ = [
    "Setup",
    "duration",
    "freeze_when_synced",
    "identity",
    "new_manager",
    "process_parser",
    "run_process",
    "serve",
]
