"""Reading `-f FILE|DIR|-` for apply and delete: the library reads (`caravanserai.text.manifestfiles`), caractrl
reports each document that cannot be read on stderr, with the library's text, and goes on with the others."""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai.cli.errors import report
from caravanserai.text.manifestfiles import Document, ManifestError, read_documents


def read_manifests(paths: Sequence[str]) -> tuple[list[Document], bool]:
    """Every readable document behind `paths`; unreadable ones are reported on stderr. Returns (documents, failed)."""
    documents: list[Document] = []
    failed = False
    for result in read_documents(paths):
        if isinstance(result, ManifestError):
            report(result)
            failed = True
        else:
            documents.append(result)
    return documents, failed


__all__ = ["read_manifests"]
