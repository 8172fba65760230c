"""Fixtures and guards shared by every test tier.

* One real etcd for the session, and a store with its own key prefix per test.
* The informer's cache mutation detector is on for the whole session: every controller and agent a test runs,
  in process or as a child process (children inherit the environment), fails loudly when it changes a cached
  object. Set here, before any informer exists, because the detector reads the environment when it is made.
* `no_leftover_tasks` (autouse) fails a test that leaves asyncio tasks running in the session's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import time
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest

from caravanserai.informer.mutation import ENV_VAR as MUTATION_DETECTOR_ENV
from caravanserai.process.logging import configure_logging
from caravanserai.storage import EtcdClient, Store
from caravanserai.testing import EtcdServer

# The plugin's fixtures (cara_etcd, cara_apiserver, cara_client, fake_clock, cara_rest_server,
# cara_restic_repository), named here too so that the suite runs in an environment installed before the plugin's
# entry point existed.
from caravanserai.testing.plugin import (  # noqa: F401
    cara_apiserver,
    cara_client,
    cara_etcd,
    cara_rest_server,
    cara_restic_repository,
    fake_clock,
)

os.environ[MUTATION_DETECTOR_ENV] = "1"

# `pytester` runs the guards below on a suite of their own (tests/unit/guards/test_suite_guards.py).
pytest_plugins = ["pytester"]

# Logs of in-process servers go to stderr (pytest shows them for failing tests), never into captured stdout.
configure_logging("info", json=False)

LEFTOVER_GRACE = 1.0
"""Seconds a task started by a test may take to finish after the test's fixtures are torn down (a cancelled task
that still runs its cleanup); a task still running then is a leak."""

_RUNNING_TEST: contextvars.ContextVar[str | None] = contextvars.ContextVar("running_test", default=None)
"""The test whose code (or whose function-scoped fixtures) is creating a task: set by `no_leftover_tasks` and
inherited by everything the test runs, but not by servers of session or module fixtures started earlier, whose
own tasks (a gRPC server's per-call tasks, say) belong to them, not to the test that sent the call."""


@pytest.fixture(autouse=True)
async def no_leftover_tasks(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Fail the test when a task that it (or one of its function-scoped fixtures) started still runs after its
    teardown and a grace of `LEFTOVER_GRACE`. Leftovers are reported, not cancelled: they are the bug to fix."""
    loop = asyncio.get_running_loop()
    test = request.node.nodeid
    started: weakref.WeakSet[asyncio.Future[Any]] = weakref.WeakSet()
    previous = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        task = previous(loop, coro, **kwargs) if previous is not None else asyncio.Task(coro, loop=loop, **kwargs)
        context = kwargs.get("context")
        if (context.get(_RUNNING_TEST) if context is not None else _RUNNING_TEST.get()) == test:
            started.add(task)
        return task

    loop.set_task_factory(factory)
    _RUNNING_TEST.set(test)
    try:
        yield
    finally:
        loop.set_task_factory(previous)
    current = asyncio.current_task()
    running = [t for t in started if t is not current and not t.done()]
    if running:
        await asyncio.wait(running, timeout=LEFTOVER_GRACE)
    leftover = [t for t in running if not t.done()]
    if leftover:
        described = "; ".join(sorted(_describe(t) for t in leftover))
        pytest.fail(f"the test left asyncio tasks running: {described}", pytrace=False)


def _describe(task: asyncio.Future[Any]) -> str:
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    name = task.get_name() if isinstance(task, asyncio.Task) else "future"
    return f"{name} ({getattr(coro, '__qualname__', None) or coro!r})"


@pytest.fixture(scope="session")
def etcd(cara_etcd: EtcdServer) -> EtcdServer:
    """The session's real etcd server (loopback ports, temporary data dir): the plugin's `cara_etcd`."""
    return cara_etcd


@pytest.fixture
async def etcd_client(etcd: EtcdServer) -> AsyncIterator[EtcdClient]:
    """A client of the session's etcd, closed after the test."""
    async with EtcdClient([etcd.endpoint], dial_timeout=10.0) as client:
        yield client


@pytest.fixture
def store(etcd_client: EtcdClient) -> Store:
    """A store under a prefix of its own, so tests never see each other's objects."""
    return Store(etcd_client, prefix=f"/test-{uuid.uuid4().hex[:12]}")


# ---- time per tier (reported at the end of every run; `bench/bench_suite.py` reads the file) ---------------------

TIER_TIMES = os.path.join("test-artifacts", "tier-times.json")
_tier_seconds: dict[str, float] = {}
_session_started: list[float] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _session_started.append(time.monotonic())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add each phase's duration (setup, call, teardown) to its tier (`tests/<tier>/…`)."""
    parts = report.nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"
    _tier_seconds[tier] = _tier_seconds.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line with the seconds spent per tier, and the same as JSON in test-artifacts/tier-times.json."""
    if not _tier_seconds or not _session_started:
        return
    session = time.monotonic() - _session_started[0]
    tiers = {tier: round(seconds, 1) for tier, seconds in sorted(_tier_seconds.items())}
    shown = ", ".join(f"{tier} {seconds:.0f} s" for tier, seconds in tiers.items())
    terminalreporter.write_line(f"time per tier: {shown}; session {session:.0f} s")
    record = {"tiers_s": tiers, "session_s": round(session, 1), "load_average_1m": round(os.getloadavg()[0], 2),
              "cpus": os.cpu_count(), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(TIER_TIMES), exist_ok=True)
        with open(TIER_TIMES, "w") as out:
            json.dump(record, out, indent=2)
