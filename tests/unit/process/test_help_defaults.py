"""`--help` of every console script shows the default of every option that has one."""

from __future__ import annotations

import argparse
import importlib
from importlib.metadata import distribution
from typing import Any

import click
import pytest

SCRIPTS = sorted(
    (ep.name, ep.value) for ep in distribution("caravanserai").entry_points if ep.group == "console_scripts"
)


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _argparse_parser(target: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser | None:
    """The argparse parser an entry point builds (None when it does not use argparse)."""
    module, _, func = target.partition(":")
    main = getattr(importlib.import_module(module), func)

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    try:
        main(["--help"])
    except _Captured as captured:
        return captured.parser
    except (SystemExit, TypeError):
        return None
    return None


def _click_command(target: str) -> click.Command | None:
    module = importlib.import_module(target.partition(":")[0])
    commands = [v for v in vars(module).values() if isinstance(v, click.Group)]
    return commands[0] if commands else None


def _has_default(default: object) -> bool:
    unset = type(default).__name__ == "Sentinel"  # click's UNSET: no default
    return not unset and default not in (None, False, argparse.SUPPRESS, "", (), []) and not callable(default)


def _argparse_missing(parser: argparse.ArgumentParser) -> list[str]:
    missing = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS or not _has_default(action.default):
            continue
        formatter = parser._get_formatter()
        text = formatter._format_action(action)
        if "default" not in text.lower():
            missing.append(action.option_strings[-1])
    return missing


def _click_missing(command: click.Command, ctx: click.Context) -> list[str]:
    missing = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden:
            continue
        if not _has_default(param.get_default(ctx, call=False)) or (param.is_flag and not param.secondary_opts):
            continue  # plain flags are off unless given
        record = param.get_help_record(ctx)
        if record is None or "default" not in record[1].lower():
            missing.append(f"{ctx.command_path} {param.opts[-1]}")
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            missing += _click_missing(sub, click.Context(sub, info_name=name, parent=ctx))
    return missing


@pytest.mark.parametrize(("name", "target"), SCRIPTS, ids=[name for name, _ in SCRIPTS])
def test_help_shows_every_default(name: str, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    command = _click_command(target)
    if command is not None:
        missing = _click_missing(command, click.Context(command, info_name=name))
    else:
        parser = _argparse_parser(target, monkeypatch)
        assert parser is not None, f"{name}: neither a click group nor an argparse parser was found"
        missing = _argparse_missing(parser)
    assert missing == [], f"{name} --help does not show the default of {missing}"
