"""Runs caractrl in process (click's CliRunner in a worker thread) against the test's apiserver.

Fixtures for CLI tests: `cli` (a `Caractrl` with an empty config directory) and `server_logs_to_stderr`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner, Result

from caravanserai.cli.caractrl import caractrl
from caravanserai.testing.apiserver import RunningApiServer


@pytest.fixture(scope="module", autouse=True)
def server_logs_to_stderr() -> Iterator[None]:
    """Keep the in-process apiserver's log lines out of the output CliRunner captures (it swaps sys.stdout)."""
    previous = structlog.get_config()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.__stderr__))
    yield
    structlog.configure(**previous)


class Caractrl:
    """Runs caractrl commands against one apiserver, with an empty config directory."""

    def __init__(self, address: str, config_home: Path) -> None:
        self.address = address
        self.env = {
            "XDG_CONFIG_HOME": str(config_home),
            "CARA_SERVER": None,
            "CARA_CONFIG": None,
            "CARA_TOKEN": None,
            "CARA_NAMESPACE": None,
        }

    async def __call__(self, *args: str, input: str | None = None, server: bool = True) -> Result:
        argv = (["--server", self.address] if server else []) + list(args)
        result = await asyncio.to_thread(CliRunner(env=self.env).invoke, caractrl, argv, input=input)
        assert "Traceback" not in result.output, result.output
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result


@pytest.fixture
def cli(api: RunningApiServer, tmp_path: Path) -> Caractrl:
    config_home = tmp_path / "config"
    config_home.mkdir()
    return Caractrl(api.address, config_home)
