"""Reading `-f FILE|DIR|-` for apply and delete, one document at a time.

`caravanserai.manifest` checks a whole text at once. caractrl wants more: a bad document must not stop the good
ones, and a server-side error must still name the file and document it came from. So each file is cut into
its YAML documents here (at `---` / `...` marker lines, which YAML forbids inside any content) and each
document is loaded on its own, padded with blank lines so that line numbers in syntax errors stay those of
the file. Documents are numbered as YAML numbers them (empty ones count).
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from caravanserai import manifest
from caravanserai.errors import Invalid

from caravanserai.cli.errors import report

STDIN = "<stdin>"
_START = re.compile(r"---(\s|$)")
_END = re.compile(r"\.\.\.(\s|$)")


@dataclass(frozen=True, slots=True)
class Source:
    """One file (or stdin) to read: its name in messages and its text."""

    name: str
    text: str


@dataclass(frozen=True, slots=True)
class Document:
    """One object read from a manifest, with where it came from (`web.yaml, document 2`)."""

    origin: str
    object: Any


class ManifestError(ValueError):
    """A document that could not be read; the message names file, document and field path."""


def manifest_sources(paths: Sequence[str]) -> Iterator[Source | ManifestError]:
    """The sources behind `-f` arguments: files, directories (their .yaml/.yml/.json files by name) and "-"."""
    for path in paths:
        if path == "-":
            yield Source(STDIN, sys.stdin.read())
            continue
        try:
            files = _files(path)
            for file in files:
                with open(file, encoding="utf-8-sig") as handle:
                    yield Source(file, handle.read())
        except (OSError, UnicodeDecodeError) as exc:
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
            yield ManifestError(f"{path}: cannot read: {reason}")


def _files(path: str) -> list[str]:
    if not os.path.isdir(path):
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return [path]
    names = sorted(n for n in os.listdir(path) if n.endswith(manifest.MANIFEST_SUFFIXES))
    return [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]


def split_documents(text: str) -> list[tuple[int, str]]:
    """(first line index, text) of every YAML document in `text`, in order, empty ones included."""
    documents: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    for number, line in enumerate(text.splitlines(keepends=True)):
        if _START.match(line):
            current = [line]
            documents.append((number, current))
        elif _END.match(line):
            current = None
        elif current is not None:
            current.append(line)
        elif line.strip() and not line.lstrip().startswith(("#", "%")):
            current = [line]
            documents.append((number, current))
    return [(first, "".join(lines)) for first, lines in documents]


def load_source(source: Source) -> Iterator[Document | ManifestError]:
    """Every object of a source, or an error for each document that cannot be read."""
    for index, (first_line, text) in enumerate(split_documents(source.text), start=1):
        origin = f"{source.name}, document {index}"
        try:
            objects = manifest.load_manifests("\n" * first_line + text, source=source.name)
        except Invalid as exc:
            yield ManifestError(exc.message.replace(f"{source.name}, document 1", origin))
            continue
        if len(objects) == 1:
            yield Document(origin, objects[0])
        else:
            yield from (Document(f"{origin}, item {i}", o) for i, o in enumerate(objects, start=1))


def read_manifests(sources: Iterator[Source | ManifestError]) -> tuple[list[Document], bool]:
    """Every readable document of `sources`; unreadable ones are reported on stderr. Returns (documents, failed)."""
    documents: list[Document] = []
    failed = False
    for source in sources:
        results = [source] if isinstance(source, ManifestError) else load_source(source)
        for result in results:
            if isinstance(result, ManifestError):
                report(result)
                failed = True
            else:
                documents.append(result)
    return documents, failed


__all__ = ["STDIN", "Document", "ManifestError", "Source", "load_source", "manifest_sources", "read_manifests",
           "split_documents"]
