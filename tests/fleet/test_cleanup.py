"""A fleet whose test process was killed leaves namespaces, links, a rule, a route and processes behind; the next
run removes all of it (keyed by the run's name prefix and its run directory)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from support.fleet import HostProcess, NamespacesUnavailable, Network, check_available, cleanup
from support.fleet.netns import PREFIX, free_subnet, sh


async def test_leftovers_of_a_killed_run_are_removed() -> None:
    try:
        check_available()
    except NamespacesUnavailable as exc:
        pytest.skip(f"fleet tier skipped: {exc}")
    run_id = "dead"
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer exists: the "killed" owner
    subnet = free_subnet("0ead")
    path = cleanup.claim_run(run_id, str(subnet))
    (path / "owner").write_text(str(gone.pid))
    network = Network.create(run_id, subnet)
    host = network.add_host("h0")
    sleeper = HostProcess("sleeper", ["sleep", "600"], log_path=Path(path / "sleeper.log"), netns=host.netns)
    await sleeper.start()
    orphan = sleeper._proc  # noqa: SLF001
    assert orphan is not None
    for _ in range(100):  # until it has entered the namespace (setpriv and nsenter exec first)
        if str(orphan.pid) in sh("ip", "netns", "pids", host.netns).split():
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the process never entered its namespace")
    sleeper._proc = None  # noqa: SLF001 - forget it, as a killed test process would
    try:
        assert run_id in cleanup.leftover_runs()
        assert run_id in cleanup.remove_leftovers()
        prefix = f"{PREFIX}{run_id}"
        assert prefix not in sh("ip", "netns", "list")
        assert prefix not in sh("ip", "-o", "link", "show")
        assert prefix not in sh("iptables", "-S", "FORWARD")
        assert str(subnet) not in sh("ip", "route", "show")
        assert not path.exists()
        assert _dead(orphan.pid)  # killed by the cleanup (a zombie until reaped counts as dead)
    finally:
        cleanup.remove_run(run_id)


def _dead(pid: int) -> bool:
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False
