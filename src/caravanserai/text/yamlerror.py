"""One line for a YAML parse error: where and what, never the parser's own context lines or advice.

`describe(exc)` gives `line L, column C: invalid YAML: PROBLEM` (the wording of manifests and Compose files) for
ruamel.yaml's errors: the position of the problem (1-based, `first_line` added for a document that starts further
down a file) and the problem's first line. ruamel's messages also quote the input, say "in <unicode string>" and,
for duplicate keys, add a hint pointing to ruamel's own documentation ("To suppress this check see: …"), which
means nothing to a user of Caravanserai: none of that is kept.
"""

from __future__ import annotations

from ruamel.yaml.error import MarkedYAMLError, YAMLError


def describe(exc: YAMLError, *, first_line: int = 0) -> str:
    """`line L, column C: invalid YAML: PROBLEM` (without the position when the error has none), one line."""
    problem = getattr(exc, "problem", None) if isinstance(exc, MarkedYAMLError) else None
    text = str(problem) if problem else str(exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    mark = getattr(exc, "problem_mark", None) if isinstance(exc, MarkedYAMLError) else None
    where = f"line {first_line + mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}invalid YAML: {first}"


__all__ = ["describe"]
