"""Reading `-f FILE|DIR|-` for apply and delete: the library reads (`caravanserai.text.manifestfiles`), caractrl
reports each document that cannot be read on stderr, with the library's text, and goes on with the others.

A source that is a Compose file by its content (`services:` at the top and no `kind:`; `compose.yaml` in a
directory as well) is converted to its Project by `caravanserai.compose`, as `caractrl convert` does: one
`warning:` line on stderr per key without an equivalent, one error line when it cannot be converted."""

from __future__ import annotations

import os
from collections.abc import Sequence

import click

from caravanserai.cli.errors import report
from caravanserai.compose import ComposeError, convert_text, looks_like_compose
from caravanserai.text.manifestfiles import STDIN, Document, ManifestError, Source, load_source, read_path


def compose_document(source: Source) -> Document:
    """The Project of a Compose source (its folder: the file's, or the working directory for stdin); its notes are
    printed on stderr. Raises `ComposeError`."""
    directory = os.getcwd() if source.name == STDIN else os.path.dirname(os.path.abspath(source.name))
    conversion = convert_text(source.text, source=source.name, directory=directory, environ=dict(os.environ))
    for note in conversion.notes:
        click.echo(str(note), err=True)
    return Document(conversion.project, source.name, 1, 1)


def read_manifests(paths: Sequence[str]) -> tuple[list[Document], bool]:
    """Every readable document behind `paths`; unreadable ones are reported on stderr. Returns (documents, failed)."""
    documents: list[Document] = []
    failed = False
    for path in paths:
        for source in read_path(path):
            if isinstance(source, ManifestError):
                report(source)
                failed = True
                continue
            if looks_like_compose(source.text):
                try:
                    documents.append(compose_document(source))
                except ComposeError as exc:
                    report(exc)
                    failed = True
                continue
            for result in load_source(source):
                if isinstance(result, ManifestError):
                    report(result)
                    failed = True
                else:
                    documents.append(result)
    return documents, failed


__all__ = ["compose_document", "read_manifests"]
