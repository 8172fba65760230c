"""The import contracts of pyproject.toml catch what they promise to catch.

Each case copies the package (the wings' links followed, as setup.py installs them) into a temporary tree, adds one
import that breaks a rule, and runs `lint-imports` with the project's own configuration against the copy: the named
contract must be reported broken. The unchanged copy is checked once too, so a failure is the injected import's.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
LINT_IMPORTS = pathlib.Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A copy of `caravanserai` (generated code and wings included) and of pyproject.toml, under one folder."""
    if not LINT_IMPORTS.exists():
        pytest.skip("lint-imports is not installed beside this Python (pip install -e '.[test]')")
    base = tmp_path_factory.mktemp("contracts")
    shutil.copytree(
        ROOT / "src" / "caravanserai",
        base / "src" / "caravanserai",
        ignore=shutil.ignore_patterns("__pycache__", "static"),
    )
    shutil.copy(ROOT / "pyproject.toml", base / "pyproject.toml")
    return base


def lint(base: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(base / "src"), "COLUMNS": "1000"}  # no wrapping of contract names
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=base, env=env, capture_output=True, text=True, timeout=300
    )


def add_import(base: pathlib.Path, module: str, line: str) -> str:
    """Append `line` to `module` (a path below caravanserai/) and return the file's previous text."""
    path = base / "src" / "caravanserai" / module
    before = path.read_text()
    path.write_text(before + f"\n{line}  # injected by the contract test\n")
    return before


def broken_contracts(output: str) -> list[str]:
    return [line.removesuffix(" BROKEN").strip() for line in output.splitlines() if line.endswith(" BROKEN")]


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        pytest.param(
            "errors.py",
            "import caravanserai.text.manifest",
            "layers: core, text | process, project | customkinds, storage, apiserver/client, runtime, wings, testing",
            id="core-imports-a-room",
        ),
        pytest.param(
            "text/quantity.py",
            "import caravanserai.project.lifecycle",
            "layers: core, text | process, project | customkinds, storage, apiserver/client, runtime, wings, testing",
            id="text-imports-project",
        ),
        pytest.param(
            "agent/workload/ordering.py",
            "import aiodocker",
            "only the agent's Docker room imports aiodocker",
            id="aiodocker-outside-the-docker-room",
        ),
        pytest.param(
            "agent/docker/naming.py",
            "import caravanserai.agent.workload.ordering",
            "agent rooms: wiring, access | fencing, ingress | host | workload | volumes, docker",
            id="docker-room-imports-a-room-above",
        ),
        pytest.param(
            "agent/volumes/epochs.py",
            "import caravanserai.agent.workload.ordering",
            "agent rooms: wiring, access | fencing, ingress | host | workload | volumes, docker",
            id="volumes-room-imports-a-sibling-room",
        ),
    ],
)
def test_a_misplaced_import_breaks_its_contract(
    package_copy: pathlib.Path, module: str, line: str, contract: str
) -> None:
    before = add_import(package_copy, module, line)
    try:
        result = lint(package_copy)
    finally:
        (package_copy / "src" / "caravanserai" / module).write_text(before)
    assert result.returncode != 0, result.stdout
    assert contract in broken_contracts(result.stdout), result.stdout


def test_the_unchanged_copy_keeps_every_contract(package_copy: pathlib.Path) -> None:
    result = lint(package_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert broken_contracts(result.stdout) == []
