"""Unit tests of caravanserai.workqueue: one group per guarantee in the package docstring."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Hashable

import pytest

from caravanserai.testing.clock import FakeClock
from caravanserai.workqueue import (
    ExponentialBackoff,
    MaxOf,
    NoMetrics,
    ShutDown,
    TokenBucket,
    WorkQueue,
    default_rate_limiter,
)


async def wait_for(predicate: Callable[[], bool], timeout: float = 2.0) -> None:
    """Let the event loop run until `predicate()` holds; fail after `timeout` real seconds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0)


async def settle(rounds: int = 20) -> None:
    """Let every runnable task take a few steps."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def runs_workqueue_code(task: asyncio.Task[object]) -> bool:
    """Whether `task` runs a coroutine of the workqueue, of its tests or of the fake clock."""
    code = getattr(task.get_coro(), "cr_code", None)
    filename = code.co_filename if code is not None else ""
    return "workqueue" in filename or filename.endswith(("testing/clock.py", "testing\\clock.py"))


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves a task behind (an unfinished worker or a queue timer not shut down).

    Only tasks running this package's code count: the session's loop may host other tiers' background tasks.
    """
    before = asyncio.all_tasks()
    yield
    await settle()
    others = asyncio.all_tasks() - before - {asyncio.current_task()}
    leaked = {task for task in others if runs_workqueue_code(task)}
    for task in leaked:
        task.cancel()
    assert not leaked, f"leaked tasks: {leaked}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class RecordingMetrics(NoMetrics):
    def __init__(self) -> None:
        self.events: list[tuple[str, object, float]] = []

    def added(self, key: Hashable) -> None:
        self.events.append(("added", key, 0.0))

    def depth(self, queued: int) -> None:
        self.events.append(("depth", None, float(queued)))

    def queue_latency(self, key: Hashable, seconds: float) -> None:
        self.events.append(("queue_latency", key, seconds))

    def work_duration(self, key: Hashable, seconds: float) -> None:
        self.events.append(("work_duration", key, seconds))

    def retried(self, key: Hashable) -> None:
        self.events.append(("retried", key, 0.0))

    def of(self, kind: str) -> list[tuple[object, float]]:
        return [(key, value) for event, key, value in self.events if event == kind]


async def take_all(queue: WorkQueue[str]) -> list[str]:
    """Take (and finish) every queued key, in the order handed out."""
    taken = []
    while len(queue):
        key = await queue.get_key()
        queue.done(key)
        taken.append(key)
    return taken


# Fair ----------------------------------------------------------------------------------------------------


async def test_keys_are_handed_out_in_order_of_first_add(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for key in ["c", "a", "b", "a", "c"]:
        queue.add(key)
    assert await take_all(queue) == ["c", "a", "b"]


async def test_a_key_readded_after_processing_goes_to_the_back(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add("b")
    key = await queue.get_key()
    queue.done(key)
    queue.add("a")
    assert await take_all(queue) == ["b", "a"]


# Stingy --------------------------------------------------------------------------------------------------


async def test_adds_before_processing_collapse_into_one(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for _ in range(5):
        queue.add("x")
    assert len(queue) == 1
    assert await take_all(queue) == ["x"]
    assert len(queue) == 0 and queue.processing == 0


async def test_a_key_being_processed_is_not_handed_to_a_second_worker(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("x")
    assert await queue.get_key() == "x"
    queue.add("x")
    assert (len(queue), queue.processing) == (0, 1)
    second = asyncio.create_task(queue.get_key())
    await settle()
    assert not second.done()
    queue.done("x")
    assert await asyncio.wait_for(second, 2.0) == "x"
    queue.done("x")


async def test_keys_are_any_hashable(clock: FakeClock) -> None:
    queue: WorkQueue[tuple[str, int]] = WorkQueue(clock=clock)
    queue.add(("ns", 1))
    queue.add(("ns", 1))
    queue.add(("ns", 2))
    async with queue.get() as key:
        assert key == ("ns", 1)
    assert len(queue) == 1


# Re-add while processing ---------------------------------------------------------------------------------


async def test_readd_while_processing_runs_exactly_once_more(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    key = await queue.get_key()
    for _ in range(3):
        queue.add("a")
    assert len(queue) == 0
    queue.done(key)
    assert await take_all(queue) == ["a"]
    assert (len(queue), queue.processing) == (0, 0)


async def test_done_of_a_key_not_being_processed_raises(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("a")
    key = await queue.get_key()
    queue.done(key)
    with pytest.raises(ValueError, match="not being processed"):
        queue.done(key)


# async with queue.get() ----------------------------------------------------------------------------------


async def test_async_with_calls_done_on_exit(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    async with queue.get() as key:
        assert (key, queue.processing) == ("a", 1)
        queue.add("a")
    assert (queue.processing, len(queue)) == (0, 1)


async def test_async_with_calls_done_on_exception(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    with pytest.raises(RuntimeError, match="reconcile failed"):
        async with queue.get():
            raise RuntimeError("reconcile failed")
    assert queue.processing == 0
    queue.add("a")
    assert await take_all(queue) == ["a"]


async def test_cancellation_inside_the_body_still_calls_done(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    inside = asyncio.Event()

    async def worker() -> None:
        async with queue.get():
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(worker())
    await inside.wait()
    queue.add("a")
    task.cancel()
    await asyncio.wait([task])
    assert task.cancelled()
    assert (queue.processing, len(queue)) == (0, 1)
    assert await take_all(queue) == ["a"]


async def test_a_lease_is_entered_once(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    lease = queue.get()
    async with lease:
        pass
    with pytest.raises(RuntimeError, match="entered once"):
        await lease.__aenter__()


# Cancellation never loses a key --------------------------------------------------------------------------


async def test_a_waiter_cancelled_after_being_woken_leaves_the_key(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    waiter = asyncio.create_task(queue.get_key())
    await settle()
    queue.add("a")  # wakes the waiter, which has not run yet
    waiter.cancel()
    await asyncio.wait([waiter])
    assert waiter.cancelled()
    assert (len(queue), queue.processing) == (1, 0)
    assert await take_all(queue) == ["a"]


async def test_a_cancelled_woken_waiter_passes_the_key_to_the_next_waiter(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    first = asyncio.create_task(queue.get_key())
    await settle()
    second = asyncio.create_task(queue.get_key())
    await settle()
    queue.add("a")
    first.cancel()
    assert await asyncio.wait_for(second, 2.0) == "a"
    assert first.cancelled()
    queue.done("a")


async def test_a_get_that_times_out_takes_nothing(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await queue.get_key()
    queue.add("a")
    assert await take_all(queue) == ["a"]


async def test_cancelled_waiters_leave_nothing_behind(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    waiters = [asyncio.create_task(queue.get_key()) for _ in range(100)]
    await settle()
    for waiter in waiters:
        waiter.cancel()
    await asyncio.wait(waiters)
    assert len(queue._getters) == 0  # no bookkeeping kept for getters that gave up
    queue.add("a")
    assert await take_all(queue) == ["a"]


async def test_several_waiters_each_get_one_key(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    waiters = [asyncio.create_task(queue.get_key()) for _ in range(3)]
    await settle()
    for key in "abc":
        queue.add(key)
    assert sorted(await asyncio.gather(*waiters)) == ["a", "b", "c"]
    assert queue.processing == 3
    for key in "abc":
        queue.done(key)


# add_after -----------------------------------------------------------------------------------------------


async def test_add_after_adds_once_the_delay_has_passed(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 5.0)
    await settle()
    assert (len(queue), queue.delayed) == (0, 1)
    clock.advance(4.9)
    await settle()
    assert len(queue) == 0
    clock.advance(0.1)
    await wait_for(lambda: len(queue) == 1)
    assert queue.delayed == 0
    assert await take_all(queue) == ["a"]


async def test_add_after_without_a_positive_delay_adds_at_once(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 0)
    queue.add_after("b", -1.0)
    assert (len(queue), queue.delayed) == (2, 0)
    assert await take_all(queue) == ["a", "b"]


async def test_a_later_shorter_delay_wins(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10.0)
    await settle()
    queue.add_after("a", 2.0)
    clock.advance(2.0)
    await wait_for(lambda: len(queue) == 1)
    assert await take_all(queue) == ["a"]
    clock.advance(10.0)
    await settle()
    assert (len(queue), queue.delayed) == (0, 0)


async def test_a_later_longer_delay_does_not_postpone(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 2.0)
    queue.add_after("a", 10.0)
    assert queue.delayed == 1
    clock.advance(2.0)
    await wait_for(lambda: len(queue) == 1)
    assert await take_all(queue) == ["a"]
    clock.advance(10.0)
    await settle()
    assert len(queue) == 0


async def test_delayed_keys_are_added_in_deadline_order(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("late", 3.0)
    queue.add_after("early", 1.0)
    queue.add_after("middle", 2.0)
    queue.add_after("tie", 2.0)
    clock.advance(5.0)
    await wait_for(lambda: len(queue) == 4)
    assert await take_all(queue) == ["early", "middle", "tie", "late"]


async def test_a_delayed_key_already_queued_collapses(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 1.0)
    queue.add("a")
    clock.advance(1.0)
    await wait_for(lambda: queue.delayed == 0)
    assert await take_all(queue) == ["a"]


async def test_an_idle_queue_owns_no_timer_task(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    before = asyncio.all_tasks()
    queue.add_after("a", 1.0)
    assert len(asyncio.all_tasks() - before) == 1
    clock.advance(1.0)
    await wait_for(lambda: asyncio.all_tasks() <= before)
    assert await take_all(queue) == ["a"]


# Rate limiting -------------------------------------------------------------------------------------------


def test_exponential_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    limiter = ExponentialBackoff(base_delay=0.005, max_delay=1000.0)
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1000.0 and max(delays) == 1000.0
    assert limiter.num_requeues("a") == 20
    assert limiter.when("b") == 0.005


def test_exponential_backoff_forget_resets_the_failures() -> None:
    limiter = ExponentialBackoff()
    for _ in range(5):
        limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_exponential_backoff_stays_capped_after_many_failures() -> None:
    limiter = ExponentialBackoff(base_delay=1.0, max_delay=60.0)
    delays = [limiter.when("a") for _ in range(1200)]
    assert delays[-1] == 60.0


@pytest.mark.parametrize(
    ("base_delay", "max_delay"), [(0.0, 1.0), (-1.0, 1.0), (float("inf"), float("inf")), (2.0, 1.0)]
)
def test_exponential_backoff_rejects_bad_numbers(base_delay: float, max_delay: float) -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(base_delay=base_delay, max_delay=max_delay)


def test_token_bucket_allows_a_burst_then_paces(clock: FakeClock) -> None:
    bucket = TokenBucket(qps=10.0, burst=100, clock=clock)
    assert [bucket.when(f"k{i}") for i in range(100)] == [0.0] * 100
    assert [bucket.when(f"k{i}") for i in range(100, 103)] == pytest.approx([0.1, 0.2, 0.3])
    clock.advance(0.3)
    assert bucket.when("k103") == pytest.approx(0.1)
    clock.advance(100.0)
    assert bucket.when("k104") == 0.0
    assert bucket.num_requeues("k104") == 0


@pytest.mark.parametrize(("qps", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_token_bucket_rejects_bad_numbers(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps=qps, burst=burst)


def test_default_limiter_takes_the_longer_of_backoff_and_bucket(clock: FakeClock) -> None:
    limiter = default_rate_limiter(clock=clock)
    assert [limiter.when(f"k{i}") for i in range(100)] == [0.005] * 100
    assert limiter.when("fresh") == pytest.approx(0.1)  # the bucket is empty: 10 per second
    clock.advance(1000.0)
    delays = [limiter.when("hot") for _ in range(10)]
    assert delays[-1] == pytest.approx(0.005 * 2**9)  # the backoff is longer than the bucket's pace
    assert limiter.num_requeues("hot") == 10
    limiter.forget("hot")
    assert limiter.num_requeues("hot") == 0


def test_default_limiter_numbers_are_configurable(clock: FakeClock) -> None:
    limiter = default_rate_limiter(clock=clock, base_delay=1.0, max_delay=4.0, qps=1.0, burst=2)
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([1.0, 2.0, 4.0, 4.0])


def test_max_of_asks_every_limiter() -> None:
    slow, fast = ExponentialBackoff(base_delay=1.0), ExponentialBackoff(base_delay=0.5)
    limiter = MaxOf(slow, fast)
    assert limiter.when("a") == 1.0
    assert (slow.num_requeues("a"), fast.num_requeues("a")) == (1, 1)


async def test_add_rate_limited_waits_the_backoff_and_forget_resets_it(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for expected_delay in [0.005, 0.01, 0.02]:
        queue.add_rate_limited("a")
        await settle()
        assert len(queue) == 0
        clock.advance(expected_delay)
        await wait_for(lambda: len(queue) == 1)
        assert await take_all(queue) == ["a"]
    assert queue.num_requeues("a") == 3
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    clock.advance(0.005)
    await wait_for(lambda: len(queue) == 1)
    assert await take_all(queue) == ["a"]


async def test_add_rate_limited_uses_the_given_limiter(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock, rate_limiter=ExponentialBackoff(base_delay=2.0, max_delay=3.0))
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")  # 4 s, capped at 3 s: later than the pending 2 s, so it changes nothing
    clock.advance(2.0)
    await wait_for(lambda: len(queue) == 1)
    assert queue.num_requeues("a") == 2
    assert await take_all(queue) == ["a"]


# Shutdown ------------------------------------------------------------------------------------------------


async def test_shut_down_ignores_later_adds(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    await queue.shut_down()
    queue.add("a")
    queue.add_after("b", 1.0)
    queue.add_rate_limited("c")
    assert (len(queue), queue.delayed, queue.shutting_down) == (0, 0, True)
    with pytest.raises(ShutDown):
        await queue.get_key()


async def test_shut_down_wakes_waiting_getters_with_shutdown(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)

    async def worker() -> str:
        try:
            async with queue.get():
                return "got a key"
        except ShutDown:
            return "shut down"

    workers = [asyncio.create_task(worker()) for _ in range(3)]
    await settle()
    await queue.shut_down()
    assert await asyncio.gather(*workers) == ["shut down"] * 3


async def test_keys_queued_before_shut_down_are_still_handed_out(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add("b")
    await queue.shut_down()
    assert await take_all(queue) == ["a", "b"]
    with pytest.raises(ShutDown):
        async with queue.get():
            pass


async def test_shut_down_drops_delayed_keys(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 1.0)
    await queue.shut_down()
    clock.advance(2.0)
    await settle()
    assert (len(queue), queue.delayed) == (0, 0)


async def test_drain_waits_for_keys_in_flight(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add("b")
    a = await queue.get_key()
    b = await queue.get_key()
    drain = asyncio.create_task(queue.shut_down(drain=True))
    await settle()
    assert not drain.done() and queue.shutting_down
    queue.done(a)
    await settle()
    assert not drain.done()
    queue.done(b)
    await asyncio.wait_for(drain, 2.0)
    assert queue.processing == 0


async def test_drain_with_nothing_in_flight_returns_at_once(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    await asyncio.wait_for(queue.shut_down(drain=True), 2.0)
    assert queue.shutting_down


async def test_a_later_plain_shut_down_ends_a_drain(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    key = await queue.get_key()
    drain = asyncio.create_task(queue.shut_down(drain=True))
    await settle()
    assert not drain.done()
    await queue.shut_down()
    await asyncio.wait_for(drain, 2.0)
    assert queue.processing == 1
    queue.done(key)


async def test_a_key_readded_while_processing_runs_after_shut_down(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    key = await queue.get_key()
    queue.add("a")
    await queue.shut_down()
    queue.done(key)
    assert await take_all(queue) == ["a"]


# Counters and metrics ------------------------------------------------------------------------------------


async def test_len_counts_queued_keys_and_processing_counts_held_ones(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for key in "abc":
        queue.add(key)
    key = await queue.get_key()
    assert (len(queue), queue.processing) == (2, 1)
    queue.done(key)
    assert (len(queue), queue.processing) == (2, 0)
    assert await take_all(queue) == ["b", "c"]


async def test_metrics_hooks_report_adds_depth_latency_duration_and_retries(clock: FakeClock) -> None:
    metrics = RecordingMetrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=metrics)
    queue.add("a")
    queue.add("a")
    queue.add("b")
    clock.advance(2.0)
    async with queue.get() as key:
        clock.advance(3.0)
    queue.add_rate_limited(key)
    assert metrics.of("added") == [("a", 0.0), ("b", 0.0)]
    assert [depth for _, depth in metrics.of("depth")] == [1.0, 2.0, 1.0]
    assert metrics.of("queue_latency") == [("a", 2.0)]
    assert metrics.of("work_duration") == [("a", 3.0)]
    assert metrics.of("retried") == [("a", 0.0)]
    await queue.shut_down()


# FakeClock -----------------------------------------------------------------------------------------------


async def test_fake_clock_sleep_returns_once_time_reaches_the_deadline(clock: FakeClock) -> None:
    start_wall, start_monotonic = clock.now(), clock.monotonic()
    sleeper = asyncio.create_task(clock.sleep(2.0))
    await settle()
    clock.advance(1.0)
    await settle()
    assert not sleeper.done() and clock.sleepers == 1
    clock.advance(1.0)
    await asyncio.wait_for(sleeper, 2.0)
    assert (clock.now() - start_wall, clock.monotonic() - start_monotonic, clock.sleepers) == (2.0, 2.0, 0)


async def test_fake_clock_forgets_cancelled_sleepers(clock: FakeClock) -> None:
    sleeper = asyncio.create_task(clock.sleep(5.0))
    await settle()
    sleeper.cancel()
    await asyncio.wait([sleeper])
    assert clock.sleepers == 0
    await asyncio.wait_for(clock.sleep(0), 2.0)
    with pytest.raises(ValueError):
        clock.advance(-1.0)
