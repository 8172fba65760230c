"""`python -m caravanserai.protoc` writes the module and its typed .pyi stub, so an operator's code type-checks
against its kind's fields."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mypy import api as mypy_api

from support.examples import ROOT

PROTO = ROOT / "examples" / "backup-operator" / "backup.proto"


def test_protoc_writes_module_and_stub_and_mypy_uses_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "caravanserai.protoc", f"--python_out={tmp_path}", str(PROTO)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "backup_pb2.py").is_file()
    stub = (tmp_path / "backup_pb2.pyi").read_text(encoding="utf-8")
    assert "class BackupSpec" in stub and "interval" in stub
    (tmp_path / "uses.py").write_text(
        "import backup_pb2\n\nb = backup_pb2.Backup()\nb.spec.interval = 30\nb.spec.interval = 'thirty'\n",
        encoding="utf-8",
    )
    out, _, status = mypy_api.run(["--strict", "--no-incremental", "--cache-dir=/dev/null", str(tmp_path / "uses.py")])
    assert status == 1, out
    assert 'uses.py:5: error: Incompatible types in assignment (expression has type "str"' in out
    assert "uses.py:4" not in out


def test_no_stubs_writes_only_the_module(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "caravanserai.protoc", "--no-stubs", f"--python_out={tmp_path}", str(PROTO)],
        check=True,
        timeout=60,
    )
    assert (tmp_path / "backup_pb2.py").is_file() and not (tmp_path / "backup_pb2.pyi").exists()
