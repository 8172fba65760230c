"""Controllers and the Manager against a real apiserver: retries with backoff, requeue_after, TerminalError,
mapped handlers, health/readiness/metrics over HTTP, a clean stop on SIGTERM, and the EventRecorder."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.controller import (
    Controller,
    EventRecorder,
    Manager,
    Result,
    TerminalError,
    enqueue_mapped,
)
from caravanserai.errors import Conflict
from caravanserai.informer import Backoff, CacheMutationError, WatchOptions
from caravanserai.testing.builders import node, project
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.wait import wait_for
from caravanserai.workqueue import WorkQueue, default_rate_limiter

FAST = Backoff(initial=0.05, cap=0.3)


@contextlib.asynccontextmanager
async def running(coro: Coroutine[Any, Any, None]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Script:
    """A reconciler that records each call (key, monotonic time) and does what `behaviour(key, attempt)` says."""

    def __init__(self, behaviour: Any = None) -> None:
        self.calls: list[tuple[str, float]] = []
        self.behaviour = behaviour or (lambda key, attempt: Result())

    def attempts(self, key: str) -> list[float]:
        return [at for k, at in self.calls if k == key]

    async def reconcile(self, key: str) -> Result:
        self.calls.append((key, time.monotonic()))
        outcome = self.behaviour(key, len(self.attempts(key)))
        if isinstance(outcome, BaseException):
            raise outcome
        if asyncio.iscoroutine(outcome):
            result: Result = await outcome
            return result
        assert isinstance(outcome, Result)
        return outcome


def manager_for(client: Client, **kwargs: Any) -> Manager:
    return Manager(client, watch_options=WatchOptions(backoff=FAST), shutdown_timeout=5.0, **kwargs)


async def test_errors_are_retried_with_growing_backoff_then_forgotten(client: Client) -> None:
    await client.projects.create(project("flaky"))
    script = Script(lambda key, attempt: Conflict("someone wrote first") if attempt <= 4 else Result())
    manager = manager_for(client)
    projects = manager.informers.informer(v1.Project)
    queue: WorkQueue[str] = WorkQueue(rate_limiter=default_rate_limiter(base_delay=0.02))
    controller = Controller("flaky", script, queue)
    controller.watch(projects)
    manager.add(controller)
    async with running(manager.run()):
        await wait_for(lambda: len(script.attempts("default/flaky")) == 5, 5)  # keys: "namespace/name"
        await asyncio.sleep(0.2)

    times = script.attempts("default/flaky")
    assert len(times) == 5  # four failures, one success, then nothing more
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    for n, gap in enumerate(gaps):
        assert gap >= 0.02 * 2**n * 0.9, gaps  # 20 ms · 2ⁿ
    assert queue.num_requeues("default/flaky") == 0  # forgotten after the success
    assert controller.metrics.results == {"success": 1, "requeue_after": 0, "error": 4, "terminal": 0}


async def test_requeue_after_reconciles_again_on_the_clock() -> None:
    clock = FakeClock()
    script = Script(lambda key, attempt: Result(requeue_after=3600.0) if attempt == 1 else Result())
    controller = Controller("later", script, clock=clock)
    async with running(controller.run()):
        controller.enqueue("k")
        await wait_for(lambda: clock.sleepers == 1, 2)  # the queue's timer for the requeue
        clock.advance(3599.0)
        await asyncio.sleep(0.05)
        assert len(script.calls) == 1
        clock.advance(1.0)
        await wait_for(lambda: len(script.calls) == 2, 2)
    assert controller.metrics.results["requeue_after"] == 1 and controller.metrics.results["success"] == 1


async def test_no_reconcile_starts_while_the_controller_may_not_act() -> None:
    allowed = False
    script = Script()
    controller = Controller("gated", script)
    controller.may_act = lambda: allowed  # as the manager's `leading` past the renew deadline
    async with running(controller.run()):
        controller.enqueue("k")
        await asyncio.sleep(0.3)
        assert script.calls == [] and controller.queue.processing == 1  # the key is held, not dropped
        allowed = True
        await wait_for(lambda: len(script.calls) == 1, 2)


async def test_terminal_error_is_not_retried_until_the_object_changes(client: Client) -> None:
    await client.projects.create(project("doomed"))
    script = Script(lambda key, attempt: TerminalError("cannot ever work") if attempt == 1 else Result())
    manager = manager_for(client)
    projects = manager.informers.informer(v1.Project)
    controller = Controller("doomed", script)
    controller.watch(projects)
    manager.add(controller)
    async with running(manager.run()):
        await wait_for(lambda: len(script.calls) == 1, 5)
        await asyncio.sleep(0.3)
        assert len(script.calls) == 1  # given up
        changed = await client.projects.get("doomed")
        changed.metadata.labels["fixed"] = "yes"
        await client.projects.update(changed)  # a change is a new reason to look
        await wait_for(lambda: len(script.calls) == 2, 5)
    assert controller.metrics.results["terminal"] == 1 and controller.queue.num_requeues("doomed") == 0


async def test_mapped_handlers_turn_a_node_change_into_the_keys_it_concerns(client: Client) -> None:
    for name, zone in (("web", "a"), ("db", "b"), ("batch", "a")):
        await client.projects.create(project(name, node_selector={"zone": zone}))
    manager = manager_for(client)
    projects = manager.informers.informer(v1.Project)
    nodes = manager.informers.informer(v1.Node)

    def pending_projects_for(n: v1.Node) -> list[str]:
        zone = n.metadata.labels.get("zone")
        return [p.metadata.name for p in projects.list() if p.spec.node_selector.get("zone") == zone]

    script = Script()
    controller = Controller("placement", script, max_concurrent_reconciles=2)
    controller.watch(nodes, enqueue_mapped(pending_projects_for))
    manager.add(controller)
    async with running(manager.run()):
        await asyncio.sleep(0.2)
        assert script.calls == []  # no nodes yet: nothing concerns any project
        await client.nodes.create(node("n1", labels={"zone": "a"}))
        await wait_for(lambda: sorted(k for k, _ in script.calls) == ["batch", "web"], 5)


async def test_manager_serves_health_readiness_and_metrics(client: Client) -> None:
    await client.projects.create(project("observed"))
    manager = manager_for(client, metrics_port=0)
    projects = manager.informers.informer(v1.Project)
    controller = Controller("observer", Script(lambda key, attempt: Result(requeue_after=60.0)))
    controller.watch(projects)
    manager.add(controller)
    async with running(manager.run()):
        await wait_for(lambda: manager.metrics_port and controller.metrics.results["requeue_after"] == 1, 5)
        port = manager.metrics_port
        assert await http_get(port, "/healthz") == (200, "ok\n")
        assert await http_get(port, "/readyz") == (200, "ok\n")
        status, text = await http_get(port, "/metrics")
        assert await http_get(port, "/nope") == (404, "no such path: /nope\n")

    assert status == 200
    assert 'caravanserai_controller_reconcile_total{controller="observer",result="requeue_after"} 1' in text
    assert 'caravanserai_controller_reconcile_time_seconds_count{controller="observer"} 1' in text
    assert 'caravanserai_workqueue_adds_total{name="observer"} 1' in text
    assert 'caravanserai_workqueue_depth{name="observer"} 0' in text
    assert 'caravanserai_informer_cached_objects{resource="projects"} 1' in text
    assert "# TYPE caravanserai_controller_reconcile_time_seconds histogram" in text


async def http_get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


async def test_sigterm_drains_in_flight_reconciles_and_stops_cleanly(client: Client) -> None:
    await client.projects.create(project("slow"))
    finished: list[str] = []

    async def slow(key: str) -> Result:
        started.set()
        await asyncio.sleep(0.3)
        finished.append(key)
        return Result()

    started = asyncio.Event()
    manager = manager_for(client, metrics_port=0)
    controller = Controller("slow", Script(lambda key, attempt: slow(key)))
    controller.watch(manager.informers.informer(v1.Project))
    manager.add(controller)
    run = asyncio.create_task(manager.run())
    manager.install_signal_handlers()
    await asyncio.wait_for(started.wait(), 5)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(run, 5)  # returns by itself: no cancellation needed

    assert finished == ["default/slow"]  # the reconcile in flight was allowed to finish
    assert controller.queue.shutting_down and manager.metrics_port == 0
    assert all(not informer.reflector.watches or informer.has_synced() for informer in manager.informers.informers())


async def test_a_reconciler_that_mutates_the_cache_stops_the_manager_loudly(client: Client) -> None:
    await client.projects.create(project("victim"))
    manager = manager_for(client, detect_mutations=True)
    projects = manager.informers.informer(v1.Project)

    def careless(key: str, attempt: int) -> Result:
        cached = projects.get(key)
        assert cached is not None
        cached.spec.priority = 5  # must copy first
        return Result()

    controller = Controller("careless", Script(careless))
    controller.watch(projects)
    manager.add(controller)
    with pytest.raises(CacheMutationError, match="'default/victim' was modified in place"):
        await asyncio.wait_for(manager.run(), 5)


async def test_event_recorder_aggregates_identical_events(client: Client) -> None:
    clock = FakeClock()
    target = await client.projects.create(project("noisy"))
    recorder = EventRecorder(client, component="cara-test", clock=clock, aggregation_window=300.0)
    first = await recorder.warning(target, "FailedThing", "it failed")
    clock.advance(10.0)
    again = await recorder.warning(target, "FailedThing", "it failed")
    other = await recorder.normal(target, "DidThing", "it worked")
    clock.advance(301.0)
    later = await recorder.warning(target, "FailedThing", "it failed")

    assert first is not None and again is not None and other is not None and later is not None
    assert first.metadata.name.startswith("noisy.") and len(first.metadata.name) == len("noisy.") + 16
    assert again.metadata.name == first.metadata.name and again.spec.count == 2
    assert again.spec.last_timestamp.seconds - again.spec.first_timestamp.seconds == 10
    assert other.metadata.name != first.metadata.name and other.spec.type == "Normal"
    assert later.metadata.name not in (first.metadata.name, other.metadata.name) and later.spec.count == 1
    ref, source = first.spec.involved_object, first.spec.source
    assert (ref.kind, ref.name, ref.uid) == ("Project", "noisy", target.metadata.uid)
    assert source.component == "cara-test"
    stored = sorted((e.spec.reason, e.spec.count) for e in (await client.events.list()).items)
    assert stored == [("DidThing", 1), ("FailedThing", 1), ("FailedThing", 2)]
