"""Durations as operators write them: `90`, `90s`, `1.5s`, `500ms`, `3m`, `2h`, `1h30m`, `1d`."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)")


def parse_duration(text: str) -> float:
    """Seconds for `text`. A bare number is seconds. Raises ValueError (argparse shows it) for anything else."""
    value = text.strip().lower()
    if not value:
        raise ValueError("empty duration")
    try:
        seconds = float(value)
    except ValueError:
        pos, seconds = 0, 0.0
        for match in _PART.finditer(value):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(value):
            raise ValueError(f"invalid duration {text!r}: use e.g. 90, 90s, 500ms, 3m, 1h30m") from None
    if seconds < 0:
        raise ValueError(f"invalid duration {text!r}: must not be negative")
    return seconds


def format_age(elapsed: float) -> str:
    """An age for sentences: "just now", "42s ago", "3 min ago", "5 h ago", "2 days ago"."""
    s = int(max(0.0, elapsed))
    if s < 2:
        return "just now"
    if s < 120:
        return f"{s}s ago"
    if s < 2 * 3600:
        return f"{s // 60} min ago"
    if s < 2 * 86400:
        return f"{s // 3600} h ago"
    return f"{s // 86400} days ago"


def format_duration(seconds: float) -> str:
    """Short age text as kubectl prints it: 5s, 3m, 2h, 4d."""
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 2 * 3600:
        return f"{s // 60}m"
    if s < 2 * 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


__all__ = ["format_age", "format_duration", "parse_duration"]
