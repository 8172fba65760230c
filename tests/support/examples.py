"""The example operators of examples/, imported once per session by file path (their folders are not packages)."""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]


@functools.cache
def backup_operator() -> types.ModuleType:
    """examples/backup-operator/backup_operator.py as the module `backup_operator`."""
    path = ROOT / "examples" / "backup-operator" / "backup_operator.py"
    spec = importlib.util.spec_from_file_location("backup_operator", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["backup_operator"] = module
    spec.loader.exec_module(module)
    return module


__all__ = ["ROOT", "backup_operator"]
