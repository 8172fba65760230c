"""The example operators of examples/, imported once per session by file path (their folders are not packages)."""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name: str, path: pathlib.Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def backup_operator() -> types.ModuleType:
    """examples/backup-operator/backup_operator.py as the module `backup_operator`."""
    return _load("backup_operator", ROOT / "examples" / "backup-operator" / "backup_operator.py")


@functools.cache
def webfarm_operator() -> types.ModuleType:
    """examples/webfarm/webfarm_controller.py as the module `webfarm_controller`."""
    return _load("webfarm_controller", ROOT / "examples" / "webfarm" / "webfarm_controller.py")


__all__ = ["ROOT", "backup_operator", "webfarm_operator"]
