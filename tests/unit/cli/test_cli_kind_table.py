"""The CLI's kind table is the one home of kind knowledge in caractrl: no command module branches on a kind.

A kind branch is a comparison of a plural or resource name with a literal (`kind.plural == "nodes"`), a type test
on a built-in message class (`isinstance(obj, v1.Project)`), a dict keyed by plurals or a tuple of plurals
(`("nodes", "projects")`). Commands that serve one kind only (`logs`, `exec`, `drain` …) name it as their fixed
resource, which is no branch.
"""

from __future__ import annotations

import re
from pathlib import Path

from caravanserai import meta
from caravanserai.cli import kinds

CLI = Path(kinds.__file__).resolve().parent.parent
PLURALS = "|".join(sorted(meta.KINDS))
CLASSES = "|".join(sorted(k.cls.__name__ for k in meta.KINDS.values()))
KIND_BRANCH = re.compile(
    rf"""\b(plural|resource)\s*(==|!=|\bin\b|\bnot in\b)\s*[("'\[{{]"""  # kind.plural == "nodes", resource in (…)
    rf"""|\.kind\s*(==|!=)\s*["']"""  # kind.kind == "Node"
    rf"""|isinstance\([^)]*\bv1\.({CLASSES})\b"""  # isinstance(obj, v1.Project)
    rf"""|\{{\s*"({PLURALS})"\s*:"""  # {"projects": …}
    rf"""|=\s*\(\s*"({PLURALS})"\s*,"""  # WAITABLE = ("nodes", …)
    rf"""|^\s*"({PLURALS})"\s*:"""  # an entry of a dict keyed by plurals, on a line of its own
    rf"""|\[\s*"({PLURALS})"\s*\]\s*=(?!=)"""  # COLUMNS["nodes"] = …
)


def test_the_pattern_finds_kind_branches() -> None:
    for line in (
        'if kind.plural == "projects":',
        'if resource in ("nodes", "projects"):',
        'if obj.kind != "Node":',
        "if not isinstance(obj, v1.Project) or done:",
        'hint = {"projects": " or phase=PHASE"}',
        'WAITABLE = ("nodes", "projects", CUSTOM_KINDS)',
        '    "nodes": Columns(',
        'COLUMNS["resourcedefinitions"] = Columns(',
    ):
        assert KIND_BRANCH.search(line), line
    for line in (
        'exec_command.fixed_resource = "projects"',
        'if kind == "stdout":',
        "if kind.plural == plural:",
        'kind = meta.KINDS["projects"]',
    ):
        assert not KIND_BRANCH.search(line), line


def test_no_cli_module_outside_the_kind_table_branches_on_a_kind() -> None:
    offenders = []
    for path in sorted(CLI.rglob("*.py")):
        if path.parent.name == "kinds":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if KIND_BRANCH.search(line):
                offenders.append(f"{path.relative_to(CLI)}:{number}: {line.strip()}")
    assert offenders == []


def test_every_builtin_kind_has_one_view() -> None:
    assert sorted(kinds.VIEWS) == sorted(meta.KINDS)
    for plural, view in kinds.VIEWS.items():
        assert view.plural == plural
        assert kinds.view_of(meta.KINDS[plural]) is view
