"""What the Compose reader says about a file: a refusal (`ComposeError`) or a note (`Note`), each naming its key.

    ComposeError("compose.yaml", "services.web.extends", "is not supported: copy the keys into the service")
    # str(): compose.yaml: services.web.extends: is not supported: copy the keys into the service

Guarantees:

* **Every problem names its path** in the Compose file's own keys, dotted, with list indexes in brackets
  (`services.web.ports[1]`); a key with a space or a control character is quoted with escapes; a problem of the
  whole file has the path "".
* **One line.** The message never holds a line break (a caller prints it as it is).
"""

from __future__ import annotations

import json
from dataclasses import dataclass


def _one_line(text: str) -> str:
    return " ".join(text.split())


def join(path: str, key: object) -> str:
    """`path` extended by a mapping key (`a.b`) or a list index (`a[2]`)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    name = _key(str(key))
    return f"{path}.{name}" if path else name


def _key(key: str) -> str:
    """A key as written, or quoted with escapes (`"a\\nb"`) when it is empty or holds a space or a control
    character, so the path stays one readable line."""
    if key and key.isprintable() and not any(c.isspace() for c in key):
        return key
    return json.dumps(key)


class ComposeError(ValueError):
    """A Compose file that cannot be converted: where (`source`, `path`) and why (`problem`)."""

    def __init__(self, source: str, path: str, problem: str) -> None:
        self.source, self.path, self.problem = source, path, _one_line(problem)
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {self.problem}")


@dataclass(frozen=True, slots=True)
class Note:
    """A key that has no equivalent, or is converted differently from what Compose does: said once, never guessed
    silently. `str(note)` is the line printed on stderr."""

    source: str
    path: str
    text: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.path}" if self.path else self.source
        return f"warning: {where}: {_one_line(self.text)}"


__all__ = ["ComposeError", "Note", "join"]
