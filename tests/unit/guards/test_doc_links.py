"""Every relative link of the documentation (docs/, the README, ARCHITECTURE.md, deploy/'s documents) leads to a
file of the repository, and a link with a `#fragment` into a Markdown file to one of its headings; a document
named in plain text (`see deploy/x.md`, in the docs and in deploy/'s units and examples) exists too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = sorted(
    [*ROOT.glob("docs/**/*.md"), *ROOT.glob("deploy/**/*.md"), ROOT / "README.md", ROOT / "ARCHITECTURE.md"]
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings of `markdown`."""
    found = set()
    for heading in re.findall(r"^#+\s+(.*?)\s*#*$", FENCE.sub("", markdown), re.MULTILINE):
        text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def relative_links(document: Path) -> list[str]:
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("//")]


def broken(document: Path, target: str) -> str | None:
    """Why `target` (a link of `document`) leads nowhere; None when it resolves."""
    path, _, fragment = target.partition("#")
    resolved = (document.parent / path).resolve() if path else document
    if not resolved.exists():
        return f"{target}: no such file"
    if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text(encoding="utf-8")):
        return f"{target}: no heading #{fragment} in {resolved.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    problems = [why for target in relative_links(document) if (why := broken(document, target))]
    assert problems == [], f"{document.relative_to(ROOT)}: {problems}"


def test_links_are_found() -> None:
    sample = ROOT / "docs" / "secrets.md"
    assert "cli.md#delete" in relative_links(sample)


MENTION = re.compile(r"(?<![\w/.-])((?:\.\./)?(?:[\w-]+/)+[\w.-]+\.md)\b")
MENTIONING = sorted({*DOCUMENTS, *(p for p in ROOT.glob("deploy/**/*") if p.is_file() and p.suffix != ".json")})


@pytest.mark.parametrize("document", MENTIONING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_document_named_in_text_exists(document: Path) -> None:
    named = MENTION.findall(document.read_text(encoding="utf-8"))
    missing = [n for n in named if not (ROOT / n).exists() and not (document.parent / n).exists()]
    assert missing == [], f"{document.relative_to(ROOT)} names missing documents: {missing}"
