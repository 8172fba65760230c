"""The `--help` layout of every argparse-based console script: each option shows its default; and the one way a
flag's value is parsed by a function of ours.

    parser = argparse.ArgumentParser(prog="cara-agent", formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--pull-timeout", type=flag_type(parse_duration))
    parser.add_argument("--reserved-cpu", type=flag_type(parse_quantity, keep_text=True))

`flag_type(parse)` turns a parser that raises `ValueError` into an argparse `type=`: the error's own text becomes
argparse's one-line `argument --flag: <text>` (exit 2), never a traceback; `keep_text=True` checks the value and keeps
the text as given.

`(default: X)` is appended to an option's help unless the help already states a default; options without one
(None, a plain flag that is off unless given) say nothing, and options without any help text get the default
alone. (click-based scripts, `caractrl` and `cara`, show defaults with click's `show_default`.)
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _shows_default(action: argparse.Action) -> bool:
    default = action.default
    if not action.option_strings or action.help == argparse.SUPPRESS:
        return False
    return default not in (None, False, argparse.SUPPRESS, "", [], ())


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with each option's default in its help (see the module docstring)."""

    def _format_action(self, action: argparse.Action) -> str:
        if action.help is None and _shows_default(action):
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if _shows_default(action) and "default" not in text.lower():
            text = f"{text} (default: %(default)s)" if text else "(default: %(default)s)"
        return text


__all__ = ["DefaultsHelpFormatter"]


def flag_type(parse: Callable[[str], Any], *, keep_text: bool = False) -> Callable[[str], Any]:
    """An argparse `type=` from `parse` (see the module docstring): its result, or the text when `keep_text`."""

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text if keep_text else value

    return convert
