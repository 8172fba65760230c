"""The soak's JSON report (in the manner of the benchmarks' output): figures, then one verdict line per invariant.

{"benchmark": "soak", "verdict": "pass" | "fail", "invariants": [{"invariant", "figure", "target",
 "verdict": "held" | "violated", "detail"}…], "writes": {…}, "faults": {…}, "convergence": {…},
 "duplicates": {…}, "resources": {…}, "leftovers": {…}, …}
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from support.soak.config import SoakConfig
from support.soak.duplicates import duplicates_section
from support.soak.faults import FaultInjector
from support.soak.history import WriteLog
from support.soak.observe import Observer
from support.soak.sampler import ResourceSampler
from support.soak.verdict import line
from support.soak.workload import Workload

EXAMPLES = 10
LEAKS = {"rss_leak": "rss_mib", "fd_leak": "fds", "db_leak": "db_in_use_mib"}
"""The leak verdicts of an incarnation (`sampler.Incarnation.figures`) and the figures they were judged by."""


def _leak(verdict: str, run: dict[str, Any]) -> str:
    """`rss_leak (rss_mib 81→112, late +64/h)`: the verdict with what it was judged by."""
    figure = LEAKS[verdict]
    start = run.get(f"{figure}_start", run.get(f"{figure}_after_warmup"))
    return f"{verdict} ({figure} {start}→{run.get(f'{figure}_end')}, late {run.get(f'{figure}_per_hour_late')}/h)"


def _faults(injector: FaultInjector, observer: Observer, origin: float) -> dict[str, Any]:
    recovered = {id(event): seconds for event, seconds in observer.recoveries}
    events = []
    for event in injector.events:
        entry = event.as_dict(origin)
        entry["recovered_s"] = round(recovered[id(event)], 1) if id(event) in recovered else None
        events.append(entry)
    times = [s for s in recovered.values()]
    return {
        "injected": len(injector.events),
        "by_type": dict(Counter(e.kind for e in injector.events)),
        "undo_errors": [f"{e.kind} {e.target}: {e.error}" for e in injector.events if e.error],
        "recovery_s_max": round(max(times), 1) if times else None,
        "recovery_s_mean": round(sum(times) / len(times), 1) if times else None,
        "events": events,
    }


def _resources(sampler: ResourceSampler, config: SoakConfig) -> tuple[dict[str, Any], list[str]]:
    figures = sampler.report(config.leaks)
    leaks = [
        f"{name} pid {run['pid']}: " + ", ".join(_leak(k, run) for k in LEAKS if run.get(k))
        for name, runs in figures.items()
        for run in runs
        if any(run.get(k) for k in LEAKS)
    ]
    return figures, leaks


def _leak_rule(judged: int, config: SoakConfig) -> str:
    limits = config.leaks
    return (
        f"{judged} process runs judged: after {limits.warmup:g}s of warm-up, none grew in the late half of its run "
        f"faster than {limits.rss_slope:g} MiB/h (or {limits.fd_slope:g} fds/h) by more than {limits.rss_floor:g} MiB "
        f"({limits.fd_floor:g} fds); etcd members also by database in use"
    )


def build_report(config: SoakConfig, results: dict[str, Any]) -> dict[str, Any]:
    """The report of a run from what `run.run_soak` gathered (a run that failed early reports what it has)."""
    left = results.get("leftovers", {})
    left_count = sum(len(v) for v in left.values())
    report: dict[str, Any] = {
        "benchmark": "soak",
        "seed": results.get("seed"),
        "duration_s": config.duration,
        "fleet": {"etcd_members": 3, "apiservers": 2, "controller_managers": 2, "agents": config.workers,
                  "heartbeat_timeout_s": config.heartbeat_timeout, "grace_period_s": config.grace_period},
    }  # fmt: skip
    if "log" not in results:
        report["error"] = results.get("error", "the run did not get as far as the workload")
        report["leftovers"] = left
        report["invariants"] = [line("nothing left behind after teardown", left_count, "= 0", left_count == 0)]
        report["verdict"] = "fail"
        return report
    log: WriteLog = results["log"]
    workload: Workload = results["workload"]
    observer: Observer = results["observer"]
    injector: FaultInjector = results["injector"]
    sampler: ResourceSampler = results["sampler"]
    lost: list[str] = results.get("lost", ["the read-back did not run"])
    stale: list[str] = results.get("stale_reads", [])
    converged_s, unconverged = results.get("convergence", (None, {"*": "not measured"}))
    resources, leaks = _resources(sampler, config)
    judged = sum(1 for runs in resources.values() for run in runs if run["judged"])
    origin = results["origin"]
    faults = _faults(injector, observer, origin)
    escaped = [e for e in injector.events if e.escaped_routes]
    duplicates, duplicate_lines = duplicates_section(
        observer.overlaps, observer.fence, injector.events, config, origin, results.get("wall_offset", 0.0)
    )
    if "error" in results:
        report["error"] = results["error"]
    report.update(
        elapsed_s=round(results["elapsed"], 1),
        writes={
            "acknowledged": log.acknowledged,
            "ambiguous": log.ambiguous,
            "refused": dict(workload.refused),
            "lost": len(lost),
            "lost_examples": lost[:EXAMPLES],
            "stale_reads": len(stale),
            "stale_read_examples": stale[:EXAMPLES],
        },
        workload={"operations": dict(workload.ops), "projects_created": workload._next,
                  "projects_deleted": len(workload.deleted), "drain_failures": workload.drain_failures[:EXAMPLES],
                  "drains": [[node, round(start - origin, 1), round(end - origin, 1) if end != float("inf") else None]
                             for node, start, end in workload.drains]},
        faults=faults,
        convergence={
            "after_last_fault_s": None if converged_s is None else round(converged_s, 1),
            "bound_s": config.convergence_bound,
            "per_fault_recovery_s": [e["recovered_s"] for e in faults["events"]],
            "unconverged": dict(list(unconverged.items())[:EXAMPLES]),
        },
        duplicates={**duplicates, "snapshots": observer.snapshots, "snapshots_without_api": observer.failed_snapshots},
        resources={"limits": dataclasses.asdict(config.leaks), "judged": judged, "processes": resources},
        leftovers=left,
    )  # fmt: skip
    report["invariants"] = [
        line("no acknowledged write lost", len(lost), "= 0", not lost and not stale,
             "; ".join((lost + stale)[:3]) or f"{log.acknowledged} acknowledged writes read back"),
        *duplicate_lines,
        line("every project converges within the bound after the last fault",
             report["convergence"]["after_last_fault_s"], f"<= {config.convergence_bound:g}s",
             converged_s is not None, "; ".join(f"{k}: {v}" for k, v in list(unconverged.items())[:3])),
        line("no process leaks memory or file descriptors", len(leaks), "= 0", not leaks,
             "; ".join(leaks[:5]) or _leak_rule(judged, config)),
        line("faults undone and the test subnet contained", len(faults["undo_errors"]) + len(escaped), "= 0",
             not faults["undo_errors"] and not escaped, "; ".join(faults["undo_errors"][:3])),
        line("nothing left behind after teardown", left_count, "= 0", left_count == 0,
             "; ".join(f"{k}: {v[:3]}" for k, v in left.items() if v)),
    ]  # fmt: skip
    if "error" in results:
        report["invariants"].append(line("the run completed", results["error"], "no error", False))
    report["verdict"] = "pass" if all(i["verdict"] == "held" for i in report["invariants"]) else "fail"
    return report


__all__ = ["build_report"]
