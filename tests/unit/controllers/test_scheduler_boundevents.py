"""The Scheduled events of bindings: noted without awaiting, written in binding order, bounded."""

from __future__ import annotations

from typing import Any, cast

from caravanserai import v1
from caravanserai.controller import EventRecorder
from caravanserai.controllers.scheduler.boundevents import BoundEvents
from caravanserai.testing import FakeClock
from caravanserai.testing.builders import project
from caravanserai.workqueue import WorkQueue


class Recorded:
    """Stands in for the EventRecorder: keeps what it was asked to record."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str, str]] = []

    async def normal(self, obj: Any, reason: str, message: str) -> None:
        meta = obj.metadata
        self.events.append((meta.name, meta.uid, meta.resource_version, reason, message))


def bound(name: str, version: str) -> v1.Project:
    p = project(name)
    p.metadata.uid = f"uid-{name}"
    p.metadata.resource_version = version
    return p


async def drain(queue: WorkQueue[str], events: BoundEvents) -> None:
    while len(queue):
        async with queue.get() as key:
            await events.reconcile(key)


async def test_events_are_written_after_the_bindings_in_their_order() -> None:
    recorder, queue = Recorded(), WorkQueue[str](clock=FakeClock())
    events = BoundEvents(cast(EventRecorder, recorder), queue)
    events.note(bound("a", "11"), "n1")
    events.note(bound("b", "12"), "n2")
    assert recorder.events == [] and len(events) == 2  # noting never waits for the API
    await drain(queue, events)
    assert recorder.events == [
        ("a", "uid-a", "11", "Scheduled", "Successfully assigned a to n1"),
        ("b", "uid-b", "12", "Scheduled", "Successfully assigned b to n2"),
    ]
    assert len(events) == 0


async def test_a_second_binding_before_the_event_is_written_leaves_one_event_for_it() -> None:
    recorder, queue = Recorded(), WorkQueue[str](clock=FakeClock())
    events = BoundEvents(cast(EventRecorder, recorder), queue)
    events.note(bound("a", "11"), "n1")
    events.note(bound("a", "15"), "n2")
    await drain(queue, events)
    assert recorder.events == [("a", "uid-a", "15", "Scheduled", "Successfully assigned a to n2")]


async def test_waiting_events_are_bounded() -> None:
    recorder, queue = Recorded(), WorkQueue[str](clock=FakeClock())
    events = BoundEvents(cast(EventRecorder, recorder), queue, max_pending=2)
    for name in ("a", "b", "c"):
        events.note(bound(name, "1"), "n1")
    events.note(bound("a", "2"), "n1")  # already waiting: replaced, not dropped
    assert (len(events), events.dropped) == (2, 1)
    await drain(queue, events)
    assert [e[:3] for e in recorder.events] == [("a", "uid-a", "2"), ("b", "uid-b", "1")]
