"""Who owns a Secret volume's files, and with which modes they are written."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from caravanserai.agent.workload.datafiles import DataFiles, default_mode, file_owner


@pytest.mark.parametrize(
    ("user", "owner"),
    [("", (0, 0)), ("root", (0, 0)), ("0:0", (0, 0)), ("1000", (1000, 0)), ("1000:2000", (1000, 2000)),
     ("app", None), ("app:app", None), ("1000:app", None)],
)  # fmt: skip
def test_file_owner(user: str, owner: tuple[int, int] | None) -> None:
    assert file_owner(user) == owner


def test_default_modes() -> None:
    assert default_mode((1000, 0)) == 0o400
    assert default_mode(None) == 0o444


def test_written_with_private_directories_and_the_owner(tmp_path: Path) -> None:
    files = DataFiles(str(tmp_path / "root"))
    me = (os.geteuid(), os.getegid())
    path = Path(files.write("p", "creds", {"token": b"t"}, mode=0o400, owner=me))
    for directory in (tmp_path / "root", tmp_path / "root" / "p", path):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    token = path / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o400
    assert (token.stat().st_uid, token.stat().st_gid) == me
    shared = Path(files.write("p", "creds", {"token": b"t"}, mode=0o444, owner=None))
    assert shared != path and stat.S_IMODE(shared.stat().st_mode) == 0o755
