"""The agent's restic runner against real restic 0.14 and local-path repositories: initialised only when allowed,
backups whose files land at the snapshot's root, pruning over one volume's snapshots, and restic's real faults
classified into one line each."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from caravanserai.agent.volumes import resticerrors
from caravanserai.agent.volumes.repository import Repository
from caravanserai.agent.volumes.restic import Restic, ResticSettings
from caravanserai.agent.volumes.resticerrors import ResticError
from caravanserai.clock import SystemClock

pytestmark = pytest.mark.skipif(shutil.which("restic") is None, reason="restic is not installed")

CLOCK = SystemClock()
PASSWORD = "correct horse battery staple"


def repo(url: str, *, initialize: bool = False, password: str = PASSWORD) -> Repository:
    return Repository("offsite", url, {"RESTIC_PASSWORD": password}, initialize)


def settings(tmp_path: pathlib.Path) -> ResticSettings:
    return ResticSettings(cache_dir=str(tmp_path / "cache"))


async def test_a_repository_is_initialised_only_when_allowed(tmp_path: pathlib.Path) -> None:
    url = str(tmp_path / "repo")
    with pytest.raises(ResticError) as caught:
        await Restic(repo(url), clock=CLOCK, settings=settings(tmp_path)).snapshots("x")
    assert caught.value.kind == resticerrors.NOT_INITIALISED
    assert caught.value.message == f"repository {url} is not initialised; set spec.initialize or run restic init"
    allowed = Restic(repo(url, initialize=True), clock=CLOCK, settings=settings(tmp_path))
    assert await allowed.snapshots("x") == []
    assert (tmp_path / "repo" / "config").exists()
    await allowed.init()  # initialised meanwhile by someone else: fine


async def test_backup_forget_and_restore_put_the_files_at_the_snapshots_root(tmp_path: pathlib.Path) -> None:
    restic = Restic(repo(str(tmp_path / "repo"), initialize=True), clock=CLOCK, settings=settings(tmp_path))
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "f").write_text("hello")
    tags = ["caravanserai", "project=u1", "volume=data"]
    hosts = ("node-a", "node-b", "node-c")  # one volume moving between nodes: its snapshots are one group
    ids = [(await restic.backup(str(data), host=host, tags=tags)).snapshot_id for host in hosts]
    other = await restic.backup(str(data), host="node-a", tags=["caravanserai", "project=u1", "volume=logs"])
    await restic.forget("project=u1,volume=data", ["--keep-last=2"])
    listed = await restic.snapshots("project=u1,volume=data")
    assert [s.short_id for s in listed] == ids[:0:-1]  # the two newest of all nodes, newest first
    assert listed[0].hostname == "node-c" and "volume=data" in listed[0].tags
    assert [s.short_id for s in await restic.snapshots("project=u1,volume=logs")] == [other.snapshot_id]
    assert await restic.restore_size(listed[0].id) == 5
    target = tmp_path / "target"
    target.mkdir()
    await restic.restore(listed[0].id, str(target))
    assert (target / "sub" / "f").read_text() == "hello"


async def test_faults_of_real_restic_are_classified(tmp_path: pathlib.Path) -> None:
    url = str(tmp_path / "repo")
    await Restic(repo(url, initialize=True), clock=CLOCK, settings=settings(tmp_path)).init()
    wrong = Restic(repo(url, password="wrong"), clock=CLOCK, settings=settings(tmp_path))
    with pytest.raises(ResticError) as caught:
        await wrong.snapshots("x")
    assert caught.value.kind == resticerrors.WRONG_PASSWORD and "wrong" not in caught.value.message.split(":")[0]
    right = Restic(repo(url), clock=CLOCK, settings=settings(tmp_path))
    with pytest.raises(ResticError) as caught:
        await right.restore("deadbeef", str(tmp_path))
    assert caught.value.message == f"snapshot deadbeef not found in repository {url}"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ResticError) as caught:
        await right.backup(str(empty), host="n", tags=["t"])
    assert caught.value.kind == resticerrors.EMPTY
    unreachable = Restic(repo("rest:http://127.0.0.1:1/"), clock=CLOCK, settings=settings(tmp_path))
    with pytest.raises(ResticError) as caught:
        await unreachable.snapshots("x")
    assert caught.value.kind == resticerrors.UNREACHABLE
    assert caught.value.message.endswith("dial tcp 127.0.0.1:1: connect: connection refused")
