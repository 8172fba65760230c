"""What every step of a conversion shares: the file's name and folder, the variables, the notes said so far."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from caravanserai.compose.problems import ComposeError, Note


@dataclass
class Context:
    """One conversion's state. `environ` is the environment the Compose file is read with (the process's, then
    `.env`); `notes` collects one `Note` per key without an equivalent, in the order met."""

    source: str
    directory: str
    environ: dict[str, str]
    notes: list[Note] = field(default_factory=list)

    def note(self, path: str, text: str) -> None:
        """Say `text` about `path` once."""
        note = Note(self.source, path, text)
        if note not in self.notes:
            self.notes.append(note)

    def error(self, path: str, problem: str) -> ComposeError:
        """The refusal of `path` (raise it)."""
        return ComposeError(self.source, path, problem)

    def host_path(self, path: str) -> str:
        """An absolute, normalized host path for a Compose path: `~` is the home folder, a relative path is taken
        from the Compose file's folder (as Compose does)."""
        expanded = os.path.expanduser(path)
        return os.path.normpath(os.path.join(self.directory, expanded))


__all__ = ["Context"]
