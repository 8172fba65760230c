"""caravanserai.process.shell: until signalled (cancel or graceful stop), the one-line fatal exit, and the
supervised restart loop on a fake clock."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable

import pytest

from caravanserai.backoff import Backoff
from caravanserai.process.shell import fatal, innermost, keep_restarting, run_main, until_signalled
from caravanserai.testing.clock import FakeClock


async def _signal_then_wait(sig: signal.Signals = signal.SIGTERM) -> None:
    os.kill(os.getpid(), sig)  # the handlers are in place before main runs
    await asyncio.get_running_loop().create_future()


async def test_a_signal_cancels_main_and_the_wait_ends_quietly() -> None:
    await asyncio.wait_for(until_signalled(_signal_then_wait()), 5)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_sigint_too() -> None:
    await asyncio.wait_for(until_signalled(_signal_then_wait(signal.SIGINT)), 5)


async def test_with_stop_a_signal_asks_main_to_finish_on_its_own() -> None:
    stopping = asyncio.Event()
    finished: list[str] = []

    async def main() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await stopping.wait()
        await asyncio.sleep(0)  # a graceful stop still runs to its end
        finished.append("drained")

    await asyncio.wait_for(until_signalled(main(), stop=stopping.set), 5)
    assert finished == ["drained"]


async def test_a_second_signal_only_calls_stop_again() -> None:
    stops: list[int] = []
    stopped = asyncio.Event()

    def stop() -> None:
        stops.append(1)
        stopped.set()

    async def main() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await stopped.wait()
        os.kill(os.getpid(), signal.SIGINT)  # during the clean-up
        while len(stops) < 2:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(until_signalled(main(), stop=stop), 5)
    assert stops == [1, 1]


async def test_the_handlers_are_removed_when_the_wait_ends() -> None:
    async def done() -> None:
        return None

    await until_signalled(done())
    loop = asyncio.get_running_loop()
    assert not loop.remove_signal_handler(signal.SIGTERM) and not loop.remove_signal_handler(signal.SIGINT)


async def test_a_cancellation_from_elsewhere_is_not_swallowed() -> None:
    waiting = asyncio.create_task(until_signalled(asyncio.sleep(60)))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


def test_fatal_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        fatal("cara-x", ValueError("--listen: 'x' is not host:port"))
    assert exited.value.code == 1
    assert capsys.readouterr().err == "cara-x: --listen: 'x' is not host:port\n"
    with pytest.raises(SystemExit) as usage:
        fatal("cara-x", "bad flag", code=2)
    assert usage.value.code == 2


def _raises(error: BaseException) -> Callable[[], Awaitable[None]]:
    async def main() -> None:
        raise error

    return main


@pytest.mark.parametrize(
    "error",
    [
        OSError("address already in use"),
        ExceptionGroup("parts", [OSError("address already in use")]),
        ExceptionGroup("outer", [ExceptionGroup("inner", [OSError("address already in use")])]),
    ],
)
def test_a_start_up_error_is_one_line(error: BaseException, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run_main("cara-x", _raises(error), errors=(ValueError, OSError))
    assert exited.value.code == 1
    assert capsys.readouterr().err == "cara-x: address already in use\n"


@pytest.mark.parametrize("error", [RuntimeError("bug"), ExceptionGroup("parts", [RuntimeError("bug")])])
def test_other_errors_keep_their_traceback(error: Exception) -> None:
    with pytest.raises(type(error)):
        run_main("cara-x", _raises(error), errors=(ValueError, OSError))


def test_a_clean_end_and_ctrl_c_before_the_handlers_return() -> None:
    async def fine() -> None:
        return None

    run_main("cara-x", fine, errors=())
    run_main("cara-x", _raises(KeyboardInterrupt()), errors=())


def test_innermost() -> None:
    leaf = ValueError("x")
    assert innermost(ExceptionGroup("a", [ExceptionGroup("b", [leaf])])) is leaf
    assert innermost(leaf) is leaf


async def _until_sleeping(clock: FakeClock) -> None:
    while not clock.sleepers:
        await asyncio.sleep(0)


async def test_restarts_back_off_and_a_long_life_starts_again_from_the_first_delay() -> None:
    clock = FakeClock()
    lives = iter([0.0, 0.0, 0.0, 100.0, 0.0])  # how long each life lasts; the sixth cannot start
    exits: list[tuple[int, float]] = []

    async def life() -> int:
        length = next(lives, None)
        if length is None:
            raise RuntimeError("cannot start")
        clock.advance(length)
        return len(exits)  # the exit code: which life this was

    loop = asyncio.create_task(
        keep_restarting(
            life,
            policy=Backoff(initial=1.0, cap=4.0, jitter=0.0, reset_after=None),
            clock=clock,
            on_exit=lambda code, delay: exits.append((code, delay)),
            healthy_run=60.0,
        )
    )
    for _ in range(5):
        await _until_sleeping(clock)
        clock.advance(exits[-1][1])
    with pytest.raises(RuntimeError, match="cannot start"):
        await asyncio.wait_for(loop, 5)
    assert exits == [(0, 1.0), (1, 2.0), (2, 4.0), (3, 1.0), (4, 2.0)]
