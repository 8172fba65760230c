"""The shell every Caravanserai process runs in: until signalled, a fatal start-up error in one line, and the
restart loop of a supervisor.

    def main(argv: Sequence[str] | None = None) -> None:
        opts = parser().parse_args(argv)
        run_main("cara-dashboard", lambda: until_signalled(Dashboard(opts).run()), errors=(ValueError, OSError))

    await until_signalled(manager.run(), stop=manager.stop)    # SIGTERM: a graceful stop, then run() returns

    await keep_restarting(one_life, policy=RESTART_BACKOFF, clock=clock, on_exit=note)   # a supervisor's child

Guarantees:

* **Until signalled** (`until_signalled`): SIGTERM and SIGINT either call the `stop` given (a graceful stop:
  queues drain, leases are released, and `main` returns on its own) or, without one, cancel `main`, whose
  cancellation ends the wait quietly. Either way the process then exits 0. A clean-up that a second signal must
  not cut short (a supervisor stopping its children) belongs after `stop`, inside `main`: further signals only
  call `stop` again. The handlers are removed when the wait ends.
* **Fatal exit** (`fatal`, `run_main`): a start-up error — one of the `errors` the process names, raised by its
  main or from inside a TaskGroup (the first of the group's matching errors, unwrapped) — is printed as
  `<prog>: <message>` on stderr and the process exits 1 (or the code given), without a traceback. Any other
  exception is not hidden. Ctrl-C while `until_signalled` is not waiting (before or after) ends the process
  quietly.
* **Supervised restart** (`keep_restarting`): a child's life (`run_once`, returning its exit code) is run again
  after each exit, waiting the delays of a `caravanserai.backoff.Backoff` policy on the injected clock; a life
  longer than `healthy_run` starts the delays again from the first. `on_exit(code, delay)` is told of each exit
  before the wait (to count and log it); `run_once` raising ends the loop (a child that cannot start at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn

from caravanserai.backoff import Backoff
from caravanserai.clock import Clock

SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""The signals that stop a process."""

StartupErrors = tuple[type[BaseException], ...]


async def until_signalled(main: Awaitable[None], *, stop: Callable[[], object] | None = None) -> None:
    """Await `main` until it returns, or until SIGTERM/SIGINT: then `stop()` when given (and `main` is awaited to its
    end), else `main` is cancelled and this returns normally. See the module docstring."""
    task = asyncio.current_task()
    assert task is not None, "until_signalled runs in a task"
    signalled = False

    def on_signal() -> None:
        nonlocal signalled
        signalled = True
        (stop or task.cancel)()

    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal)
    try:
        await main
    except asyncio.CancelledError:
        if stop is not None or not signalled:
            raise  # not ours to swallow
        task.uncancel()
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)


def fatal(prog: str, message: object, *, code: int = 1) -> NoReturn:
    """Print `<prog>: <message>` on stderr and exit with `code` (1 unless told)."""
    print(f"{prog}: {message}", file=sys.stderr)
    raise SystemExit(code)


def run_main(prog: str, main: Callable[[], Awaitable[None]], *, errors: StartupErrors) -> None:
    """Run `main()` in a new event loop; one of `errors` (also inside an exception group) ends the process with
    `fatal`; Ctrl-C while `until_signalled` is not waiting ends it quietly."""
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_called(main))
    except errors as exc:
        fatal(prog, exc)
    except BaseExceptionGroup as group:
        matching = group.subgroup(errors)
        if matching is None:
            raise
        fatal(prog, innermost(matching))


async def _called(main: Callable[[], Awaitable[None]]) -> None:
    await main()


def innermost(error: BaseException) -> BaseException:
    """The first leaf of an exception group (the error itself when it is not a group)."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def keep_restarting(
    run_once: Callable[[], Awaitable[int]],
    *,
    policy: Backoff,
    clock: Clock,
    on_exit: Callable[[int, float], object],
    healthy_run: float | None = None,
) -> NoReturn:
    """Run `run_once()` (one life of a child; its exit code) again after every exit; see the module docstring."""
    backoff = policy.start(clock)
    while True:
        started = clock.monotonic()
        code = await run_once()
        if healthy_run is not None and clock.monotonic() - started > healthy_run:
            backoff.reset()
        delay = backoff.next_delay()
        on_exit(code, delay)
        await clock.sleep(delay)


__all__ = ["SIGNALS", "StartupErrors", "fatal", "innermost", "keep_restarting", "run_main", "until_signalled"]
