"""Collecting field violations, to refuse input once with every problem listed.

    found = Violations()
    found.required("metadata.name", meta.name)
    found.choice("spec.protocol", protocol, ("TCP", "UDP"), empty="for TCP")
    found.raise_if_any(what='project "web"')   # Invalid: invalid project "web": metadata.name: is required; …

Guarantees:

* Violations keep the order in which they were found; `raise_if_any` raises one `caravanserai.errors.Invalid`
  with at most `MAX_VIOLATIONS` of them (then one more saying how many were left out), or nothing; `error`
  builds that exception for callers that raise it themselves.
* Messages quote user input with `quote`, which cuts it after 64 characters, so a hostile value cannot make
  an error message huge; `key_path` builds `path["key"]` the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from caravanserai.errors import FieldViolation, Invalid

MAX_VIOLATIONS = 100
"""Most violations one error lists."""


def quote(value: str) -> str:
    """`value` in double quotes (JSON escapes), cut after 64 characters: `quote("web")` → `"web"`."""
    return json.dumps(value if len(value) <= 64 else value[:64] + "…", ensure_ascii=False)


def key_path(path: str, key: str) -> str:
    """The path of a map entry: `key_path("metadata.labels", "Bad Key")` → `metadata.labels["Bad Key"]`."""
    return f"{path}[{quote(key)}]"


class Violations:
    """The violations found so far, with helpers for the common rules."""

    def __init__(self) -> None:
        self.violations: list[FieldViolation] = []

    def add(self, path: str, description: str) -> None:
        self.violations.append(FieldViolation(path, description))

    def check(self, path: str, reason: str | None, *, prefix: str = "") -> None:
        """Record `reason` (as returned by a `validate_*` helper) unless it is None."""
        if reason is not None:
            self.add(path, prefix + reason)

    def required(self, path: str, value: object) -> bool:
        """Record "is required" when `value` is empty; True when it is set."""
        if not value:
            self.add(path, "is required")
        return bool(value)

    def choice(self, path: str, value: str, allowed: Iterable[str], *, empty: str | None = None) -> None:
        """`value` must be one of `allowed`; empty only when `empty` says what that means (e.g. "for TCP")."""
        if value in allowed or (not value and empty is not None):
            return
        options = ", ".join(quote(a) for a in allowed)
        if not value:
            self.add(path, f"is required (one of {options})")
        else:
            alternative = f" (or empty {empty})" if empty is not None else ""
            self.add(path, f"must be one of {options}{alternative}, not {quote(value)}")

    def between(self, path: str, value: int, low: int, high: int) -> None:
        if not low <= value <= high:
            self.add(path, f"must be between {low} and {high}, not {value}")

    def non_negative(self, path: str, value: int) -> None:
        if value < 0:
            self.add(path, f"must not be negative, not {value}")

    def unique(self, items: Iterable[tuple[str, str]], what: str) -> None:
        """Record every (path, key) whose non-empty key appeared before, naming where it first did."""
        seen: dict[str, str] = {}
        for path, key in items:
            if key and key in seen:
                self.add(path, f"duplicate {what} {quote(key)} (first at {seen[key]})")
            elif key:
                seen[key] = path

    def error(self, *, what: str) -> Invalid:
        """The `Invalid` ("invalid <what>: …") listing the violations (at most `MAX_VIOLATIONS`, then a count)."""
        shown = self.violations[:MAX_VIOLATIONS]
        if len(self.violations) > MAX_VIOLATIONS:
            shown.append(FieldViolation("(more)", f"{len(self.violations) - MAX_VIOLATIONS} further violations"))
        return Invalid.of(shown, what=what)

    def raise_if_any(self, *, what: str) -> None:
        """Raise `error(what=what)` if any violation was found."""
        if self.violations:
            raise self.error(what=what)


__all__ = ["MAX_VIOLATIONS", "Violations", "key_path", "quote"]
