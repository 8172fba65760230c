"""The agent's restic runner: the credentials only in restic's environment, timeouts and cancellation that leave no
process behind, waiting out a locked repository (a stand-in restic that records what it was given). Real restic
is run in tests/integration/test_volumes_restic.py."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import stat
import sys

import pytest

from caravanserai.agent.volumes import resticerrors
from caravanserai.agent.volumes.repository import Repository
from caravanserai.agent.volumes.restic import PASSED_THROUGH, Restic, ResticSettings, environment
from caravanserai.agent.volumes.resticerrors import ResticError
from caravanserai.clock import SystemClock

CLOCK = SystemClock()
PASSWORD = "correct horse battery staple"


def stand_in(tmp_path: pathlib.Path, body: str) -> str:
    """A restic stand-in: a Python script that writes its pid, argv and environment to `calls.jsonl`, then runs
    `body` (with `calls`, `sys` and `time` at hand)."""
    script = tmp_path / "restic"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, time\n"
        f"calls = {str(tmp_path / 'calls.jsonl')!r}\n"
        "with open(calls, 'a') as f:\n"
        "    f.write(json.dumps({'pid': os.getpid(), 'argv': sys.argv[1:], 'env': dict(os.environ)}) + '\\n')\n" + body
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def calls(tmp_path: pathlib.Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def gone(pid: object) -> bool:
    assert isinstance(pid, int)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def repo(url: str, *, initialize: bool = False, password: str = PASSWORD) -> Repository:
    return Repository("offsite", url, {"RESTIC_PASSWORD": password, "AWS_ACCESS_KEY_ID": "AKIA"}, initialize)


def test_the_environment_holds_the_secret_and_nothing_restic_inherited() -> None:
    base = {"PATH": "/usr/bin", "HOME": "/root", "RESTIC_PASSWORD": "the agent's own", "SECRET_OF_THE_AGENT": "x"}
    env = environment(repo("/srv/repo"), base)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "RESTIC_PASSWORD": PASSWORD,
        "AWS_ACCESS_KEY_ID": "AKIA",
        "RESTIC_REPOSITORY": "/srv/repo",
    }
    assert set(PASSED_THROUGH) >= {"PATH", "HOME", "TMPDIR"}
    assert PASSWORD not in repr(repo("/srv/repo"))


def test_rest_credentials_of_the_secret_go_into_the_repository_url_of_the_environment() -> None:
    secret = {"RESTIC_PASSWORD": PASSWORD, "RESTIC_REST_USERNAME": "bak up", "RESTIC_REST_PASSWORD": "p@ss:w/rd"}
    env = environment(Repository("offsite", "rest:https://backup.example:8000/team/", secret, False), {})
    assert env == {
        "RESTIC_PASSWORD": PASSWORD,
        "RESTIC_REPOSITORY": "rest:https://bak%20up:p%40ss%3Aw%2Frd@backup.example:8000/team/",
    }
    local = environment(Repository("local", "/srv/repo", secret, False), {})
    assert local["RESTIC_REPOSITORY"] == "/srv/repo"  # only a rest: URL takes them


async def test_the_password_never_reaches_restics_arguments(tmp_path: pathlib.Path) -> None:
    binary = stand_in(tmp_path, "print('[]')\n")
    restic = Restic(repo("/srv/repo"), clock=CLOCK, settings=ResticSettings(binary=binary, cache_dir="/c"))
    assert await restic.snapshots("project=u1,volume=data") == []
    [call] = calls(tmp_path)
    assert call["argv"] == ["--cache-dir", "/c", "snapshots", "--json", "--tag", "project=u1,volume=data"]
    env = call["env"]
    assert isinstance(env, dict) and env["RESTIC_PASSWORD"] == PASSWORD and env["RESTIC_REPOSITORY"] == "/srv/repo"
    argv = call["argv"]
    assert isinstance(argv, list) and PASSWORD not in " ".join(argv)


async def test_a_command_past_its_timeout_is_stopped_and_says_so(tmp_path: pathlib.Path) -> None:
    binary = stand_in(tmp_path, "time.sleep(60)\n")
    restic = Restic(repo("/srv/repo"), clock=CLOCK, settings=ResticSettings(binary=binary, quick_timeout=1.0))
    with pytest.raises(ResticError) as caught:
        await restic.snapshots("project=u1,volume=data")
    assert (caught.value.kind, caught.value.message) == (
        resticerrors.TIMEOUT,
        "restic snapshots did not finish within 1s",
    )
    assert gone(calls(tmp_path)[0]["pid"])


async def test_a_cancelled_command_leaves_no_restic_behind(tmp_path: pathlib.Path) -> None:
    binary = stand_in(tmp_path, "time.sleep(60)\n")
    restic = Restic(repo("/srv/repo"), clock=CLOCK, settings=ResticSettings(binary=binary))
    task = asyncio.create_task(restic.restore("a" * 64, str(tmp_path)))
    while not (tmp_path / "calls.jsonl").exists() or not (tmp_path / "calls.jsonl").read_text().endswith("\n"):
        await asyncio.sleep(0.02)  # restic runs (and has said so)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(calls(tmp_path)[0]["pid"])


async def test_an_agent_killed_by_sigkill_leaves_no_restic_behind(tmp_path: pathlib.Path) -> None:
    binary = stand_in(tmp_path, "time.sleep(60)\n")
    agent = (
        "import asyncio, sys\n"
        "from caravanserai.agent.volumes.repository import Repository\n"
        "from caravanserai.agent.volumes.restic import Restic, ResticSettings\n"
        "from caravanserai.clock import SystemClock\n"
        "repo = Repository('offsite', '/srv/repo', {'RESTIC_PASSWORD': 'pw'}, False)\n"
        f"restic = Restic(repo, clock=SystemClock(), settings=ResticSettings(binary={binary!r}))\n"
        f"asyncio.run(restic.restore('a' * 64, {str(tmp_path)!r}))\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", agent)
    try:
        while not (tmp_path / "calls.jsonl").exists() or not (tmp_path / "calls.jsonl").read_text().endswith("\n"):
            await asyncio.sleep(0.02)  # restic runs under the agent
    finally:
        proc.kill()
        await proc.wait()
    pid = calls(tmp_path)[0]["pid"]
    for _ in range(100):  # the kernel signals the orphan at once; give it a moment to be reaped
        if gone(pid):
            break
        await asyncio.sleep(0.05)
    assert gone(pid)


async def test_a_locked_repository_is_waited_for(tmp_path: pathlib.Path) -> None:
    locked = "unable to create lock in backend: repository is already locked exclusively by PID 1 on a by root"
    body = f"if len(open(calls).readlines()) < 3:\n    sys.stderr.write({locked!r} + '\\n'); sys.exit(1)\nprint('[]')\n"
    binary = stand_in(tmp_path, body)
    settings = ResticSettings(binary=binary, lock_retry=0.01, lock_wait=1.0)
    assert await Restic(repo("/srv/repo"), clock=CLOCK, settings=settings).snapshots("x") == []
    assert len(calls(tmp_path)) == 3
    impatient = ResticSettings(binary=binary, lock_retry=0.01, lock_wait=0.0)
    (tmp_path / "calls.jsonl").unlink()
    with pytest.raises(ResticError) as caught:
        await Restic(repo("/srv/repo"), clock=CLOCK, settings=impatient).snapshots("x")
    assert caught.value.kind == resticerrors.LOCKED


async def test_a_missing_binary_is_one_line() -> None:
    settings = ResticSettings(binary="/nonexistent/restic")
    with pytest.raises(ResticError, match=r"^restic snapshots: cannot run /nonexistent/restic: No such file"):
        await Restic(repo("/srv/repo"), clock=CLOCK, settings=settings).snapshots("x")
