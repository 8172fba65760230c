"""The `--help` layout of every argparse-based console script: each option shows its default.

    parser = argparse.ArgumentParser(prog="cara-agent", formatter_class=DefaultsHelpFormatter)

`(default: X)` is appended to an option's help unless the help already states a default; options without one
(None, a plain flag that is off unless given) say nothing, and options without any help text get the default
alone. (click-based scripts, `caractrl` and `cara`, show defaults with click's `show_default`.)
"""

from __future__ import annotations

import argparse
import copy


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
