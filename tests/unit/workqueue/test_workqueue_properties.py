"""Property-based tests of caravanserai.workqueue.

* `QueueModel`: a hypothesis state machine runs random adds, delayed and rate-limited adds, gets, dones,
  forgets, clock advances and shutdowns against a plain model of the algorithm, and compares after every step.
* Random interleavings of producers and several concurrent workers check: never two workers on one key, no
  key lost, adds collapse, FIFO among keys added while idle, and a drain returns only when no key is held.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from caravanserai.testing.clock import FakeClock
from caravanserai.workqueue import ExponentialBackoff, NoMetrics, ShutDown, WorkQueue

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
DELAYS = st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, 4.0])
STEPS = st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0])
BASE_DELAY, MAX_DELAY = 0.5, 2.0


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class QueueModel(RuleBasedStateMachine):
    """The queue against a model: an ordered list, a dirty set, a processing set and a table of deadlines."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        limiter = ExponentialBackoff(base_delay=BASE_DELAY, max_delay=MAX_DELAY)
        self.queue: WorkQueue[str] = WorkQueue(clock=self.clock, rate_limiter=limiter)
        self.order: list[str] = []
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.deadlines: dict[str, tuple[float, int]] = {}
        self.failures: dict[str, int] = defaultdict(int)
        self.sequence = itertools.count()
        self.shut = False

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def model_add(self, key: str) -> None:
        if self.shut or key in self.dirty:
            return
        self.dirty.add(key)
        if key not in self.processing:
            self.order.append(key)

    def model_add_after(self, key: str, delay: float) -> None:
        if self.shut:
            return
        if delay <= 0:
            self.model_add(key)
            return
        deadline = self.clock.monotonic() + delay
        if key not in self.deadlines or deadline < self.deadlines[key][0]:
            self.deadlines[key] = (deadline, next(self.sequence))

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.queue.add(key)
        self.model_add(key)

    @rule(key=KEYS, delay=DELAYS)
    def add_after(self, key: str, delay: float) -> None:
        async def call() -> None:
            self.queue.add_after(key, delay)

        self.run(call())
        self.model_add_after(key, delay)

    @rule(key=KEYS)
    def add_rate_limited(self, key: str) -> None:
        async def call() -> None:
            self.queue.add_rate_limited(key)

        self.run(call())
        if not self.shut:
            self.model_add_after(key, min(BASE_DELAY * 2 ** self.failures[key], MAX_DELAY))
            self.failures[key] += 1

    @rule(key=KEYS)
    def forget(self, key: str) -> None:
        self.queue.forget(key)
        self.failures.pop(key, None)

    @rule(seconds=STEPS)
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.run(settle())
        now = self.clock.monotonic()
        due = sorted((deadline, key) for key, deadline in self.deadlines.items() if deadline[0] <= now)
        for _, key in due:
            del self.deadlines[key]
            self.model_add(key)

    @precondition(lambda self: self.order)
    @rule()
    def get(self) -> None:
        key = self.run(self.queue.get_key())
        assert key == self.order.pop(0)
        self.dirty.remove(key)
        self.processing.add(key)

    @precondition(lambda self: self.shut and not self.order)
    @rule()
    def get_after_shut_down(self) -> None:
        with pytest.raises(ShutDown):
            self.run(self.queue.get_key())

    @precondition(lambda self: self.processing)
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.queue.done(key)
        self.processing.remove(key)
        if key in self.dirty:
            self.order.append(key)

    @rule()
    def shut_down(self) -> None:
        self.run(self.queue.shut_down())
        self.shut = True
        self.deadlines.clear()

    @invariant()
    def matches_the_model(self) -> None:
        assert len(self.queue) == len(self.order)
        assert self.queue.processing == len(self.processing)
        assert self.queue.delayed == len(self.deadlines)
        assert self.queue.shutting_down == self.shut
        for key in ["a", "b", "c", "d", "e"]:
            assert self.queue.num_requeues(key) == self.failures.get(key, 0)

    def teardown(self) -> None:
        self.run(self.queue.shut_down())
        self.loop.close()


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


# Concurrent workers --------------------------------------------------------------------------------------


class AcceptedAdds(NoMetrics):
    """Records, on the shared event counter, when the queue accepted each add."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def added(self, key: Hashable) -> None:
        self.trace.last_accepted[str(key)] = self.trace.tick()


@dataclass
class Trace:
    """What happened, stamped with one event counter shared by producers and workers."""

    counter: itertools.count[int] = field(default_factory=itertools.count)
    held_by: dict[str, int] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)
    starts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    handed_out: list[str] = field(default_factory=list)
    last_add: dict[str, int] = field(default_factory=dict)
    last_accepted: dict[str, int] = field(default_factory=dict)
    add_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def tick(self) -> int:
        return next(self.counter)


async def worker(number: int, queue: WorkQueue[str], trace: Trace, yields: list[int]) -> None:
    """Process keys until shutdown; each key takes the next number of event-loop steps from `yields`."""
    for steps in itertools.cycle(yields):
        try:
            async with queue.get() as key:
                if key in trace.held_by:
                    trace.overlaps.append(key)
                trace.held_by[key] = number
                trace.handed_out.append(key)
                trace.starts[key].append(trace.tick())
                for _ in range(steps):
                    await asyncio.sleep(0)
                del trace.held_by[key]
        except ShutDown:
            return


OPERATIONS = st.one_of(
    st.tuples(st.just("add"), KEYS),
    st.tuples(st.just("add_after"), KEYS, DELAYS),
    st.tuples(st.just("add_rate_limited"), KEYS),
    st.tuples(st.just("forget"), KEYS),
    st.tuples(st.just("advance"), STEPS),
    st.tuples(st.just("yield"), st.integers(min_value=0, max_value=4)),
)
YIELDS = st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=6)


def produce(queue: WorkQueue[str], clock: FakeClock, trace: Trace, operation: tuple[Any, ...]) -> int:
    """Apply one producer operation; return how many event-loop steps to yield afterwards."""
    match operation:
        case ("add", key):
            trace.last_add[key] = trace.tick()
            trace.add_calls[key] += 1
            queue.add(key)
        case ("add_after", key, delay):
            trace.add_calls[key] += 1
            queue.add_after(key, delay)
        case ("add_rate_limited", key):
            trace.add_calls[key] += 1
            queue.add_rate_limited(key)
        case ("forget", key):
            queue.forget(key)
        case ("advance", seconds):
            clock.advance(seconds)
        case ("yield", steps):
            return int(steps)
    return 0


async def until_idle(queue: WorkQueue[str], clock: FakeClock) -> None:
    """Fire every delayed key and let the workers finish everything queued."""
    async with asyncio.timeout(5.0):
        while len(queue) or queue.processing or queue.delayed:
            clock.advance(10.0)
            await asyncio.sleep(0)


def check_trace(trace: Trace) -> None:
    assert trace.overlaps == [], "a key was held by two workers at once"
    assert not trace.held_by
    for key, stamps in trace.starts.items():
        assert len(stamps) <= trace.add_calls[key], f"{key} ran more often than it was added"
    for key in trace.last_add.keys() | trace.last_accepted.keys():
        last = max(trace.last_add.get(key, -1), trace.last_accepted.get(key, -1))
        assert trace.starts[key] and max(trace.starts[key]) > last, f"{key} was not processed after its last add"


@given(
    operations=st.lists(OPERATIONS, max_size=60),
    workers=st.integers(min_value=1, max_value=4),
    yields=YIELDS,
)
@settings(max_examples=300, deadline=None)
async def test_concurrent_workers_never_share_a_key_and_lose_none(
    operations: list[tuple[Any, ...]], workers: int, yields: list[int]
) -> None:
    clock, trace = FakeClock(), Trace()
    limiter = ExponentialBackoff(base_delay=BASE_DELAY, max_delay=MAX_DELAY)
    queue: WorkQueue[str] = WorkQueue(clock=clock, rate_limiter=limiter, metrics=AcceptedAdds(trace))
    async with asyncio.TaskGroup() as group:
        for number in range(workers):
            group.create_task(worker(number, queue, trace, yields))
        for operation in operations:
            for _ in range(produce(queue, clock, trace, operation)):
                await asyncio.sleep(0)
        await until_idle(queue, clock)
        await queue.shut_down(drain=True)
    check_trace(trace)


@given(
    adds=st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=2), max_size=30),
    workers=st.integers(min_value=1, max_value=4),
    yields=YIELDS,
)
@settings(max_examples=100, deadline=None)
async def test_keys_added_while_idle_run_once_each_in_first_add_order(
    adds: list[str], workers: int, yields: list[int]
) -> None:
    clock, trace = FakeClock(), Trace()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for key in adds:
        queue.add(key)
    await queue.shut_down()
    async with asyncio.TaskGroup() as group:
        for number in range(workers):
            group.create_task(worker(number, queue, trace, yields))
    assert trace.handed_out == list(dict.fromkeys(adds))
    assert trace.overlaps == []


@given(
    before=st.lists(OPERATIONS, max_size=25),
    after=st.lists(OPERATIONS, max_size=10),
    workers=st.integers(min_value=1, max_value=4),
    yields=YIELDS,
)
@settings(max_examples=100, deadline=None)
async def test_drain_returns_only_when_no_key_is_held(
    before: list[tuple[Any, ...]], after: list[tuple[Any, ...]], workers: int, yields: list[int]
) -> None:
    clock, trace = FakeClock(), Trace()
    queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=AcceptedAdds(trace))
    async with asyncio.timeout(5.0), asyncio.TaskGroup() as group:
        for number in range(workers):
            group.create_task(worker(number, queue, trace, yields))
        for operation in before:
            for _ in range(produce(queue, clock, trace, operation)):
                await asyncio.sleep(0)
        accepted_before = dict(trace.last_accepted)
        await queue.shut_down(drain=True)
        assert queue.processing == 0
        assert not trace.held_by
        for operation in after:
            produce(queue, clock, trace, operation)
        assert trace.last_accepted == accepted_before, "a key was accepted after shutdown"
    # Every key accepted before the shutdown still ran after its last accepted add: nothing was lost.
    for key, stamp in accepted_before.items():
        assert max(trace.starts[key]) > stamp
    assert trace.overlaps == []
