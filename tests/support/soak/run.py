"""One soak run from start to teardown: `await run_soak(config, clock=SystemClock())` → the JSON-ready report.

Order: the fleet starts (`support.fleet.Fleet`, `config.workers` agents); the workload's Secrets are created;
then, until `config.duration` has passed, the workload, the fault injector, the observer (overlaps, recovery
after each fault), the resource sampler (RSS and fds of every process) and spot reads of acknowledged writes run
side by side. Afterwards everything is healed and restarted (`Fleet.restore`), the run waits for every project to
converge (at most `config.convergence_bound`), reads every written object back, stops the fleet and looks for
anything left behind. The report holds the figures and one verdict line per invariant (`report.verdicts`); its
`verdict` is `pass` only when every invariant held.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

from caravanserai.client import Client
from caravanserai.clock import Clock
from support.fleet import Fleet, FleetConfig
from support.soak import leftovers
from support.soak.config import SoakConfig
from support.soak.faults import FaultEvent, FaultInjector
from support.soak.history import SEQ_ANNOTATION, Observed, WriteLog
from support.soak.observe import Observer, unconverged
from support.soak.report import build_report
from support.soak.sampler import ResourceSampler
from support.soak.workload import Workload

SPOT_READ_INTERVAL = 5.0
DB_INTERVAL = 30.0


def fleet_processes(fleet: Fleet) -> Iterator[tuple[str, int | None]]:
    """(name, pid) of every process of the fleet: etcd members, apiservers, controllers, agents, watchdogs,
    engines."""
    if hasattr(fleet, "etcd"):
        for member in fleet.etcd.members:
            yield member.process.name, member.process.pid
    for process in [*fleet.apiservers, *fleet.controllers, *fleet.agents.values(), *fleet.watchdogs.values()]:
        yield process.name, process.pid
    for docker in fleet.dockers.values():
        yield docker.process.name, docker.process.pid


def _observed(obj: Any) -> Observed | None:
    if obj.metadata.HasField("deletion_timestamp"):
        return None
    seq = int(obj.metadata.annotations.get(SEQ_ANNOTATION, "0") or 0)
    return Observed(int(obj.metadata.resource_version or 0), seq)


async def read_back(client: Client, log: WriteLog, prefix: str) -> list[str]:
    """Every object the workload wrote, listed again and checked against the log; the losses found."""
    seen: dict[tuple[str, str], Observed | None] = {}
    for kind, resources in (("project", client.projects), ("secret", client.secrets)):
        for obj in await resources.list():
            if obj.metadata.name.startswith(prefix):
                seen[(kind, obj.metadata.name)] = _observed(obj)
    problems = [log.check(record, seen.get(key)) for key, record in sorted(log.records.items())]
    return [p for p in problems if p]


async def spot_reads(client: Client, log: WriteLog, rng: random.Random, clock: Clock, stop: asyncio.Event) -> list[str]:
    """While the run goes on: every few seconds read one object the log says must exist and check it (a read
    that is older than an acknowledged write). The problems found."""
    found: list[str] = []
    while not stop.is_set():
        candidates = [r for r in log.records.values() if r.exists and not r.ambiguous]
        if candidates:
            record = rng.choice(candidates)
            resources = client.projects if record.kind == "project" else client.secrets
            expected = (record.seq, record.resource_version)
            try:
                obj = await asyncio.wait_for(resources.get(record.name), 10)
            except Exception:  # noqa: BLE001 - unreachable during a fault, or deleted meanwhile: not judged
                obj = None
            if obj is not None and expected == (record.seq, record.resource_version):
                problem = log.check(record, _observed(obj))
                if problem:
                    found.append(problem)
        try:
            await asyncio.wait_for(stop.wait(), SPOT_READ_INTERVAL)
        except TimeoutError:
            continue
    return found


async def sample_resources(sampler: ResourceSampler, clock: Clock, interval: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        sampler.sample(clock.monotonic())
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            continue


async def sample_databases(
    fleet: Fleet, sampler: ResourceSampler, clock: Clock, interval: float, stop: asyncio.Event
) -> None:
    """Every `interval`: each running etcd member's database file size, size in use and raft index (`etcdctl
    endpoint status`), added to its incarnation. A member that does not answer (stopped, killed) is skipped."""
    while not stop.is_set():
        for member in fleet.etcd.members:
            pid = member.process.pid
            if pid is None:
                continue
            try:
                out = await asyncio.to_thread(
                    fleet.etcd.etcdctl, "endpoint", "status", "-w", "json", endpoints=[member.endpoint]
                )
                status = json.loads(out)[0]["Status"]
            except (RuntimeError, ValueError, LookupError, subprocess.TimeoutExpired):
                continue
            sizes = int(status["dbSize"]), int(status["dbSizeInUse"]), int(status["raftIndex"])
            sampler.record_db(member.process.name, pid, clock.monotonic(), *sizes)
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            continue


async def converge(
    observer: Observer, deleted: list[str], bound: float, clock: Clock, start: float
) -> tuple[float | None, dict[str, str]]:
    """Seconds from `start` (the end of the last fault and write) until every project has converged (None, and
    what has not, when `bound` passes first)."""
    problems: dict[str, str] = {}
    while clock.monotonic() - start <= bound:
        try:
            snap = await asyncio.wait_for(observer.snapshot(), 30)
        except Exception as exc:  # noqa: BLE001 - an engine that does not answer: try again
            problems = {"*": f"snapshot failed: {exc}"}
        else:
            await observer.observe(snap, deleted, {})
            problems = unconverged(snap, deleted)
            if not problems:
                return snap.at - start, {}
        await clock.sleep(1.0)
    return None, problems


async def run_soak(config: SoakConfig, *, clock: Clock, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """See the module docstring."""
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    fleet = Fleet(
        FleetConfig(
            workers=config.workers, heartbeat_timeout=config.heartbeat_timeout, grace_period=config.grace_period
        )
    )
    results: dict[str, Any] = {"seed": seed}
    say(f"soak: seed {seed}, {config.duration:.0f}s, starting the fleet")
    try:
        await fleet.start()
        results["subnet"] = str(fleet.network.subnet)
        say(f"soak: fleet {fleet.run_id} up on {fleet.network.subnet}")
        async with fleet.client(timeout=10, retry_timeout=20) as client:
            await _soak(fleet, client, config, clock, rng, results, say)
    except Exception as exc:  # noqa: BLE001 - the report says what broke, and the teardown still runs
        results["error"] = f"{type(exc).__name__}: {exc}"
        say(f"soak: {results['error']}")
    finally:
        say("soak: stopping the fleet")
        await fleet.stop()
    results["leftovers"] = await asyncio.to_thread(
        leftovers.find, fleet.run_id, results.get("subnet", "-"), f"soak-{fleet.run_id}"
    )
    return build_report(config, results)


async def _soak(
    fleet: Fleet,
    client: Client,
    config: SoakConfig,
    clock: Clock,
    rng: random.Random,
    results: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    log = WriteLog()
    workload = Workload(fleet, client, log, config, clock=clock, rng=rng)
    await workload.setup()
    sampler = ResourceSampler(lambda: fleet_processes(fleet))
    fence_after = config.heartbeat_timeout + config.grace_period  # the fleet's agents' --fence-after
    observer = Observer(
        fleet,
        client,
        workload.prefix,
        clock,
        config.sample_interval,
        fence_after=fence_after,
        draining=workload.draining,
    )

    def ended(event: FaultEvent) -> None:
        observer.fault_ended(event)
        error = f" {event.error}" if event.error else ""
        say(f"soak: fault {event.kind} {event.target} ({event.end - event.start:.1f}s){error}")

    injector = FaultInjector(fleet, config, clock=clock, rng=rng, on_end=ended)
    origin = clock.monotonic()
    until = origin + config.duration
    stop = asyncio.Event()
    watchers = [
        asyncio.create_task(observer.run(stop, workload.deleted, workload.touched)),
        asyncio.create_task(sample_resources(sampler, clock, config.resource_interval, stop)),
        asyncio.create_task(sample_databases(fleet, sampler, clock, DB_INTERVAL, stop)),
    ]
    spot = asyncio.create_task(spot_reads(client, log, rng, clock, stop))
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(injector.run(until))
            group.create_task(workload.run(until))
        quiet = clock.monotonic()
        say("soak: workload and faults over; healing and waiting for convergence")
        await fleet.restore()
        results["convergence"] = await converge(observer, workload.deleted, config.convergence_bound, clock, quiet)
        results["lost"] = await read_back(client, log, workload.prefix)
    finally:
        stop.set()
        await asyncio.gather(*watchers, return_exceptions=True)
        spot_result = await asyncio.gather(spot, return_exceptions=True)
        await observer.close()
        sampler.sample(clock.monotonic())
        results.update(
            origin=origin,
            wall_offset=clock.now() - clock.monotonic(),
            elapsed=clock.monotonic() - origin,
            log=log,
            workload=workload,
            observer=observer,
            injector=injector,
            sampler=sampler,
            stale_reads=spot_result[0] if isinstance(spot_result[0], list) else [repr(spot_result[0])],
        )


__all__ = ["converge", "fleet_processes", "read_back", "run_soak", "sample_databases", "spot_reads"]
