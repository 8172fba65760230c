"""The loop scope the plugin's fixtures need (docs/writing-a-controller.md, "Event loop scope"), checked on a
suite of its own run by pytester: tests and fixtures on one loop work, per-test or session-wide; tests on the
session loop with the fixtures on per-test loops fail with "attached to a different loop"."""

from __future__ import annotations

import pytest

SUITE = """
from caravanserai.testing import builders

async def test_uses_the_client(cara_client):
    await cara_client.projects.create(builders.project("loop-scope"))
    assert (await cara_client.projects.get("loop-scope")).metadata.uid
"""


def _run(pytester: pytest.Pytester, *options: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\nasyncio_mode = auto\n" + "".join(f"{o}\n" for o in options))
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")


@pytest.mark.parametrize(
    "options",
    [
        (),
        ("asyncio_default_fixture_loop_scope = session", "asyncio_default_test_loop_scope = session"),
    ],
    ids=["defaults", "both-session"],
)
def test_tests_on_the_fixtures_loop_pass(pytester: pytest.Pytester, options: tuple[str, ...]) -> None:
    result = _run(pytester, *options)
    result.assert_outcomes(passed=1)


def test_tests_on_another_loop_than_the_fixtures_fail_as_documented(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester, "asyncio_default_fixture_loop_scope = function", "asyncio_default_test_loop_scope = session"
    )
    result.assert_outcomes(failed=1)
    assert "attached to a different loop" in result.stdout.str()
