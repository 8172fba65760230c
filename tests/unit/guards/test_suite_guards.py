"""The guards of tests/conftest.py, run on a small suite of their own: a test that leaves a task running fails,
one whose tasks end within the grace passes, tasks of a longer-lived fixture are not the test's, and the cache
mutation detector is on."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"

SUITE = """
import asyncio
import os

import pytest

from caravanserai.informer.mutation import MutationDetector


@pytest.fixture(scope="module")
async def server_task():
    task = asyncio.create_task(asyncio.sleep(3600), name="module-server")
    yield task
    task.cancel()


async def test_leaks_a_task():
    asyncio.create_task(asyncio.sleep(3600), name="leaked-sleeper")


async def test_a_task_that_ends_within_the_grace_is_fine():
    asyncio.create_task(asyncio.sleep(0.2))


async def test_tasks_of_a_module_fixture_are_not_the_tests(server_task):
    assert not server_task.done()


def test_the_mutation_detector_is_on():
    assert os.environ["CARA_CACHE_MUTATION_DETECTOR"] == "1"
    assert MutationDetector().enabled
"""


def test_the_conftest_guards(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = session\n"
        "asyncio_default_test_loop_scope = session\n"
    )
    pytester.makepyfile(test_guarded=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_leaks_a_task*", "the test left asyncio tasks running: leaked-sleeper ('sleep')"]
    )
