"""The soak test: the fleet harness (three etcd members, two apiservers, two controller managers, four agents with
their fence watchdogs, each host a network namespace with its own Docker Engine) under a mixed workload (project
creates, updates, deletes, Secret changes, node drains) with a fault injected at random every 20–60 s (SIGKILL of
an etcd member, an apiserver, a controller manager or an agent; a worker's link cut for longer than the heartbeat
timeout; a SIGSTOP of a process for 10 s), and its invariants checked while it runs and at the end. Needs root.
Prints a JSON report (figures and one verdict line per invariant) and exits 1 when an invariant is violated, 2 when
it cannot run.

    sudo .venv/bin/python bench/soak.py [--duration 30m] [--seed N] [--output soak.json]
    make soak                      # 30 minutes; SOAK_DURATION=5m make soak for a shorter run

Memory and file descriptors: every process is sampled every 5 s (etcd members' database sizes every 30 s) and
judged after a warm-up of two compaction intervals and a minute (660 s; half the run when shorter), on the late
half of the rest only: a leak is growth there faster than 30 MiB (fds) per hour and by more than 8 MiB (fds), so
what fills and levels off (watch histories, etcd's history and raft log) passes and what keeps its pace fails.
etcd members are judged by their database in use too (their RSS follows the mapped database file, which only
defragmentation shrinks). Each process's report carries the figures it was judged by (`support/soak/sampler.py`).

The invariants and the figures are described in docs/fleet.md (The soak test).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

import benchlib  # noqa: F401 - makes the suite's `support` package importable

from caravanserai.clock import SystemClock
from caravanserai.process.shell import until_signalled
from support.fleet import NamespacesUnavailable, check_available
from support.soak import KINDS, SoakConfig, parse_duration, run_soak

DEFAULT_DURATION = "30m"
DEFAULTS = SoakConfig()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration",
        default=os.environ.get("SOAK_DURATION", DEFAULT_DURATION),
        help="how long the workload and faults run (90s, 5m, 1h; default $SOAK_DURATION or 30m)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the random choices (default: random)")
    parser.add_argument("--fault-interval", default="20-60", help="seconds between fault starts, MIN-MAX")
    parser.add_argument("--faults", default="", help=f"comma-separated fault kinds (default all: {','.join(KINDS)})")
    parser.add_argument(
        "--max-overlap",
        type=float,
        default=DEFAULTS.max_overlap,
        help="the fence bound: longest overlap of two copies of a service moved without a hand-off, seconds",
    )
    parser.add_argument(
        "--fence-slack",
        type=float,
        default=DEFAULTS.fence_slack,
        help="seconds a container may be seen running past its node's fence deadline (renew time + --fence-after)",
    )
    parser.add_argument(
        "--handoff-bound",
        type=float,
        default=DEFAULTS.handoff_bound,
        help="seconds a hand-off's old copy may run after the new one is ready, while its agent runs",
    )
    parser.add_argument(
        "--convergence-bound",
        type=float,
        default=DEFAULTS.convergence_bound,
        help="seconds every project has after the last fault to match its spec",
    )
    parser.add_argument("--output", default="", help="also write the report to this file")
    return parser.parse_args(argv)  # fmt: skip


def config_from(args: argparse.Namespace) -> SoakConfig:
    """The run's configuration from the command line; ValueError naming the option that is wrong."""
    low, _, high = args.fault_interval.partition("-")
    try:
        interval = (float(low), float(high or low))
    except ValueError:
        raise ValueError(f"--fault-interval {args.fault_interval!r}: expected MIN-MAX seconds, e.g. 20-60") from None
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"--faults: unknown kind {', '.join(unknown)} (one of {', '.join(KINDS)})")
    try:
        duration = parse_duration(args.duration)
    except ValueError as exc:
        raise ValueError(f"--duration: {exc}") from None
    return SoakConfig(
        duration=duration, seed=args.seed, fault_interval=interval, fault_kinds=kinds,
        max_overlap=args.max_overlap, fence_slack=args.fence_slack, handoff_bound=args.handoff_bound,
        convergence_bound=args.convergence_bound,
        leaks=dataclasses.replace(DEFAULTS.leaks, warmup=min(DEFAULTS.leaks.warmup, duration / 2)),
    )  # fmt: skip


async def _soak_until_signalled(config: SoakConfig) -> dict[str, Any] | None:
    """The report of the run, or None when SIGTERM or SIGINT ended it first (the fleet is stopped and removed
    either way: `run_soak` tears it down when cancelled)."""
    reports: list[dict[str, Any]] = []

    async def soak() -> None:
        reports.append(await run_soak(config, clock=SystemClock(), say=lambda text: print(text, file=sys.stderr)))

    await until_signalled(soak())
    return reports[0] if reports else None


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        config = config_from(args)
        check_available()
    except (ValueError, NamespacesUnavailable) as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    report = asyncio.run(_soak_until_signalled(config))
    if report is None:
        print("soak: interrupted; the fleet was stopped and removed", file=sys.stderr)
        return 130
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as out:
            out.write(text + "\n")
    for invariant in report["invariants"]:
        print(f"{invariant['verdict']:>8}: {invariant['invariant']} ({invariant['figure']} {invariant['target']})",
              file=sys.stderr)  # fmt: skip
    return 0 if report["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
