"""Reading manifests: `FILE|DIR|-` arguments → sources → YAML documents → objects, each with where it came from.

    for result in read_documents(["web.yaml", "more/", "-"]):
        if isinstance(result, ManifestError):
            print(result)                      # web.yaml, document 2: spec.zzz: unknown field
        else:
            print(result.origin)  # web.yaml, document 1, line 1

Guarantees:

* **Sources.** A path is a file, a directory (its *.yaml, *.yml and *.json files, by name, not recursively) or
  "-" for stdin. Files are read as UTF-8 (a byte-order mark is dropped). A path that cannot be read gives one
  `ManifestError`, `<path>: cannot read: <reason>`, after the files of that directory read before it.
* **Documents.** A source is cut into its YAML documents at `---` / `...` marker lines (which YAML forbids
  inside any content); documents are numbered as YAML numbers them (empty ones count) and loaded one at a time
  by `caravanserai.text.manifest`, so a bad document never hides a good one, and a syntax error names its line in
  the file.
* **Origins.** Each object comes as a `Document` with its source, document number, first line and, for the
  objects of a list document, item number; `origin` is `<file>, document <N>, line <L>` (`, item <i>`). Each problem is
  a `ManifestError` whose message starts with the origin; the wording is `caravanserai.text.manifest`'s, and callers
  print it as it is.
* `load_manifest_files` is the all-or-nothing form: every path is read and checked, then the objects are
  returned or one `Invalid` lists every problem.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from caravanserai.errors import FieldViolation, Invalid
from caravanserai.text.manifest import Resource, field_line, parse_manifests

STDIN = "<stdin>"
"""The source name of standard input in origins."""

MANIFEST_SUFFIXES = (".json", ".yaml", ".yml")
"""Files read from a directory."""

_START = re.compile(r"---(\s|$)")
_END = re.compile(r"\.\.\.(\s|$)")


@dataclass(frozen=True, slots=True)
class Source:
    """One file (or stdin) to read: its name in origins and its text."""

    name: str
    text: str


@dataclass(frozen=True, slots=True)
class Document:
    """One object read from a manifest, and where it came from."""

    object: Resource
    source: str
    number: int
    """The document's number in its source, from 1, as YAML counts (empty documents count)."""
    line: int
    """The line of the source the document starts on, from 1."""
    item: int = 0
    """The object's number among the objects of a list document, from 1; 0 for a document of one object."""
    tree: Any = field(default=None, compare=False, repr=False)
    """The object as loaded from YAML (with line numbers), for `origin_of`."""

    @property
    def origin(self) -> str:
        """`web.yaml, document 2, line 7`, or `web.yaml, document 2, line 7, item 3` for an object of a list
        document (the line is where the document starts)."""
        where = f"{self.source}, document {self.number}, line {self.line}"
        return f"{where}, item {self.item}" if self.item else where

    def origin_of(self, path: str) -> str:
        """`origin`, with the line of the field `path` (`spec.services[0].image`) where the document has it:
        `web.yaml, document 2, line 11` (`, item 3`)."""
        line = field_line(self.tree, path, self.line - 1) if self.tree is not None and path else ""
        if not line:
            return self.origin
        where = f"{self.source}, document {self.number}{line}"
        return f"{where}, item {self.item}" if self.item else where


class ManifestError(ValueError):
    """A path that cannot be read, or a document that cannot be loaded; the message says where and why."""

    def __init__(self, message: str, violations: Sequence[FieldViolation] = ()) -> None:
        super().__init__(message)
        self.violations = list(violations)


def read_path(path: str, stdin: TextIO | None = None) -> Iterator[Source | ManifestError]:
    """The sources of one path: a file, a directory's manifest files, or "-" for `stdin` (default sys.stdin)."""
    if path == "-":
        yield Source(STDIN, (stdin or sys.stdin).read())
        return
    try:
        for file in _files(path):
            with open(file, encoding="utf-8-sig") as handle:
                yield Source(file, handle.read())
    except (OSError, UnicodeDecodeError) as exc:
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
        message = f"{path}: cannot read: {reason}"
        yield ManifestError(message, [FieldViolation("", message)])


def _files(path: str) -> list[str]:
    if not os.path.isdir(path):
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return [path]
    names = sorted(n for n in os.listdir(path) if n.endswith(MANIFEST_SUFFIXES))
    return [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]


def split_documents(text: str) -> list[tuple[int, str]]:
    """(first line index from 0, text) of every YAML document in `text`, in order, empty ones included."""
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
    """Every object of a source, in order, and a `ManifestError` for each document that cannot be loaded."""
    for number, (first_line, text) in enumerate(split_documents(source.text), start=1):
        parsed = parse_manifests(text, source=source.name, first_document=number, first_line=first_line)
        if parsed.problems:
            yield ManifestError("; ".join(parsed.problems), parsed.violations)
            continue
        several = len(parsed.objects) > 1
        for item, (obj, tree) in enumerate(zip(parsed.objects, parsed.trees, strict=True), start=1):
            yield Document(obj, source.name, number, first_line + 1, item if several else 0, tree)


def read_documents(paths: Sequence[str], *, stdin: TextIO | None = None) -> Iterator[Document | ManifestError]:
    """Every object of every path, in order, and a `ManifestError` for each path or document that fails."""
    for path in paths:
        for source in read_path(path, stdin):
            if isinstance(source, ManifestError):
                yield source
            else:
                yield from load_source(source)


def load_manifest_files(paths: Sequence[str], *, stdin: TextIO | None = None) -> list[Resource]:
    """The objects of every manifest in `paths` (see `read_path`), or one `Invalid` listing every problem of
    every path, unreadable ones included (`<path>: cannot read: <reason>`), joined with "; "."""
    objects: list[Resource] = []
    problems: list[str] = []
    violations: list[FieldViolation] = []
    for result in read_documents(paths, stdin=stdin):
        if isinstance(result, ManifestError):
            problems.append(str(result))
            violations.extend(result.violations)
        else:
            objects.append(result.object)
    if problems:
        raise Invalid("; ".join(problems), violations)
    return objects


__all__ = [
    "MANIFEST_SUFFIXES",
    "STDIN",
    "Document",
    "ManifestError",
    "Source",
    "load_manifest_files",
    "load_source",
    "read_documents",
    "read_path",
    "split_documents",
]
