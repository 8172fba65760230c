"""The fleet tier: one fleet of network-namespace hosts for the session (see `tests/support/fleet`).

Skipped with the reason when namespaces cannot be made here (not root, no iproute2/iptables/nsenter). After
each test the fleet is put back: links healed, stopped processes started again, every project removed and every
engine empty, so tests may cut, kill and stop whatever they like. A failing test prints the processes' logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator

import pytest
from fleet_helpers import GRACE_PERIOD, HEARTBEAT_TIMEOUT, reset

from support.fleet import Fleet, FleetConfig, NamespacesUnavailable, check_available


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fleet/" in str(item.fspath):
            item.add_marker(pytest.mark.fleet)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]  # a hookwrapper's yield gives pluggy's Result, typed None here
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
async def fleet_session() -> AsyncIterator[Fleet]:
    try:
        check_available()
    except NamespacesUnavailable as exc:
        pytest.skip(f"fleet tier skipped: {exc}")
    config = FleetConfig(heartbeat_timeout=HEARTBEAT_TIMEOUT, grace_period=GRACE_PERIOD)
    async with Fleet(config) as fleet:
        yield fleet


@pytest.fixture
async def fleet(fleet_session: Fleet, request: pytest.FixtureRequest) -> AsyncIterator[Fleet]:
    """The session's fleet; afterwards healed, restarted and emptied (logs printed when the test failed)."""
    yield fleet_session
    if request.node.stash.get(_FAILED, False):
        print(fleet_session.logs())
    await asyncio.wait_for(reset(fleet_session), 120)
