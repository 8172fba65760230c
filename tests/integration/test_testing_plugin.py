"""The installed pytest plugin: a user's project with no conftest gets cara_etcd, cara_apiserver, cara_client and
fake_clock, in pytest-asyncio's strict mode and in auto mode."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

USER_TEST = """
import pytest

from caravanserai import v1
from caravanserai.testing import builders


{mark}
async def test_my_controller_sees_a_real_cluster(cara_client, cara_apiserver, cara_etcd, fake_clock):
    created = await cara_client.projects.create(builders.project("web"))
    assert created.status.phase == v1.PENDING
    assert cara_apiserver.address.startswith("127.0.0.1:") and cara_etcd.endpoint.startswith("http://127.0.0.1:")
    before = fake_clock.now()
    fake_clock.advance(30)
    assert fake_clock.now() == before + 30


{mark}
async def test_each_test_has_its_own_objects(cara_client):
    assert [p.metadata.name for p in await cara_client.projects.list()] == []
"""


def test_the_plugin_is_an_installed_entry_point() -> None:
    entry_points = {ep.name: ep.value for ep in distribution("caravanserai").entry_points if ep.group == "pytest11"}
    assert entry_points == {"caravanserai": "caravanserai.testing.plugin"}, (
        "the pytest11 entry point is missing: install the package again (pip install -e .)"
    )


@pytest.mark.parametrize(
    ("config", "mark"),
    [("[pytest]\n", "@pytest.mark.asyncio"), ("[pytest]\nasyncio_mode = auto\n", "")],
    ids=["strict", "auto"],
)
def test_a_users_project_needs_no_conftest(tmp_path: Path, config: str, mark: str) -> None:
    (tmp_path / "pytest.ini").write_text(config)
    (tmp_path / "test_user.py").write_text(USER_TEST.format(mark=mark))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 passed" in result.stdout
