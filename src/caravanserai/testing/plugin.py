"""The pytest plugin of `caravanserai.testing`: fixtures for testing controllers against a real etcd and a real
apiserver, and real restic repositories. Installing caravanserai registers it (entry point `pytest11`), so a user's
tests need no conftest:

    async def test_my_controller(cara_client, fake_clock):
        await cara_client.projects.create(builders.project("web"))
        ...

Fixtures:

* `cara_etcd` (session): a real `etcd` server (`EtcdServer`: the `etcd` binary on free loopback ports, a
  temporary data directory), shared by the whole session and removed at its end.
* `cara_apiserver`: a real apiserver in process on a free loopback port over `cara_etcd`, with a key prefix of
  its own (tests never see each other's objects); stopped after the test. A `RunningApiServer`.
* `cara_client`: a `Client` of `cara_apiserver`, closed after the test.
* `fake_clock`: a `FakeClock` starting at the real time (creation times come from the apiserver's clock).
* `fake_client`: a `FakeClient` on `fake_clock`: the in-memory client for unit tests of reconcile and handler
  logic (no server, no event loop of its own; see `caravanserai.testing.fakeclient`).
* `cara_rest_server`: a real restic REST server (`RestServer`: `rclone serve restic` on a free loopback port, its
  repositories in a temporary directory), stopped after the test.
* `cara_restic_repository`: a `ResticRepository` on `cara_rest_server`, initialised, with a random password (put
  it in a Secret as `RESTIC_PASSWORD`).

The async fixtures are pytest-asyncio fixtures (`pip install 'caravanserai[testing]'` brings pytest and
pytest-asyncio), so they work in pytest-asyncio's strict mode and in `asyncio_mode = auto` alike; tests using
them must be asyncio tests (`@pytest.mark.asyncio`, or any `async def` test in auto mode). Without
pytest-asyncio installed the fixtures fail with a message saying so, and pytest itself is unaffected.

Event loop scope: `cara_etcd` runs on the session's loop; `cara_apiserver`, `cara_client` and the restic fixtures
are made on the loop of `asyncio_default_fixture_loop_scope`, and a test using them must run on that same loop
(gRPC channels are bound to the loop they were made on). pytest-asyncio's defaults (function scope for fixtures
and tests) work, and so does `session` for both; a session-scoped test loop with function-scoped fixtures (or the
reverse) fails with "… attached to a different loop". `fake_clock` and `fake_client` work on any loop.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.fakeclient import FakeClient
from caravanserai.testing.restic import ResticRepository, RestServer

try:
    import pytest_asyncio

    HAVE_PYTEST_ASYNCIO = True
except ImportError:  # pragma: no cover - exercised only where pytest-asyncio is missing
    HAVE_PYTEST_ASYNCIO = False

MISSING = "the caravanserai fixtures need pytest-asyncio: pip install 'caravanserai[testing]'"


@pytest.fixture
def fake_clock() -> FakeClock:
    """A FakeClock at the real time; it moves only when the test calls `advance`."""
    return FakeClock(start=SystemClock().now())


@pytest.fixture
def fake_client(fake_clock: FakeClock) -> FakeClient:
    """An in-memory FakeClient whose clock is `fake_clock`."""
    return FakeClient(clock=fake_clock)


if HAVE_PYTEST_ASYNCIO:

    @pytest_asyncio.fixture(scope="session", loop_scope="session")
    async def cara_etcd() -> AsyncIterator[EtcdServer]:
        """A real etcd server for the whole session."""
        async with EtcdServer() as server:
            yield server

    @pytest_asyncio.fixture
    async def cara_apiserver(cara_etcd: EtcdServer) -> AsyncIterator[RunningApiServer]:
        """A real apiserver in process over `cara_etcd`, under a key prefix of its own."""
        async with apiserver(cara_etcd.endpoint) as running:
            yield running

    @pytest_asyncio.fixture
    async def cara_client(cara_apiserver: RunningApiServer) -> AsyncIterator[Client]:
        """A client of `cara_apiserver`."""
        async with Client(cara_apiserver.address, timeout=10, retry_timeout=10) as client:
            yield client

    @pytest_asyncio.fixture
    async def cara_rest_server() -> AsyncIterator[RestServer]:
        """A real restic REST server (`rclone serve restic`) on loopback, stopped after the test."""
        async with RestServer() as server:
            yield server

    @pytest_asyncio.fixture
    async def cara_restic_repository(cara_rest_server: RestServer) -> ResticRepository:
        """An initialised repository on `cara_rest_server` with a random password."""
        repository = ResticRepository(cara_rest_server.url, secrets.token_hex(16))
        await repository.init()
        return repository

else:  # pragma: no cover

    @pytest.fixture(scope="session")
    def cara_etcd() -> Any:
        pytest.fail(MISSING)

    @pytest.fixture
    def cara_apiserver() -> Any:
        pytest.fail(MISSING)

    @pytest.fixture
    def cara_client() -> Any:
        pytest.fail(MISSING)

    @pytest.fixture
    def cara_rest_server() -> Any:
        pytest.fail(MISSING)

    @pytest.fixture
    def cara_restic_repository() -> Any:
        pytest.fail(MISSING)


__all__ = ["cara_apiserver", "cara_client", "cara_etcd", "cara_rest_server", "cara_restic_repository", "fake_clock"]
