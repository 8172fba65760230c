"""The one backoff: policy delays, jitter bounds, reset by call and by quiet time, sleeping on the clock."""

from __future__ import annotations

import asyncio
import random

import pytest

from caravanserai.backoff import Backoff
from caravanserai.testing import FakeClock


def test_delays_double_from_initial_up_to_the_cap_without_jitter() -> None:
    state = Backoff(initial=1.0, cap=30.0, jitter=0.0, reset_after=None).start(FakeClock())
    assert [state.next_delay() for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    state.reset()
    assert state.next_delay() == 1.0


def test_jitter_stretches_each_delay_within_one_plus_jitter() -> None:
    policy = Backoff(initial=0.05, cap=1.0, jitter=1.0, reset_after=None)
    rng = random.Random(7)
    for step in range(10):
        base = min(1.0, 0.05 * 2**step)
        delays = [policy.delay(step, rng) for _ in range(200)]
        assert all(base <= d < 2 * base for d in delays)
        assert max(delays) - min(delays) > base / 2  # really spread, not constant


def test_a_quiet_period_of_reset_after_starts_again_from_initial() -> None:
    clock = FakeClock()
    state = Backoff(initial=1.0, cap=30.0, jitter=0.0, reset_after=120.0).start(clock)
    assert [state.next_delay() for _ in range(3)] == [1.0, 2.0, 4.0]
    clock.advance(119.0)
    assert state.next_delay() == 8.0
    clock.advance(120.0)
    assert state.next_delay() == 1.0


async def test_wait_sleeps_the_delay_on_the_injected_clock() -> None:
    clock = FakeClock()
    state = Backoff(initial=5.0, jitter=0.0).start(clock)
    waiting = asyncio.create_task(state.wait())
    while clock.sleepers == 0:
        await asyncio.sleep(0)
    clock.advance(4.9)
    await asyncio.sleep(0.01)
    assert not waiting.done()
    clock.advance(0.1)
    assert await asyncio.wait_for(waiting, 1) == 5.0


@pytest.mark.parametrize("options", [{"initial": 0.0}, {"cap": -1.0}, {"factor": 0.5}, {"jitter": -0.1}])
def test_bad_policies_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**options)
