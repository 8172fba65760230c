"""The kind table is the one home of kind knowledge on the server: no generic apiserver module names a kind."""

from __future__ import annotations

import re
from pathlib import Path

from caravanserai import meta
from caravanserai.apiserver import kinds

APISERVER = Path(kinds.__file__).parent.parent
KIND_BRANCH = re.compile(
    r"""resource\s*(==|!=|in)\s*[("']|"(projects|nodes|leases|events)"|\bv1\.(Project|Node|Lease|Event)\b"""
)


def test_no_generic_apiserver_module_names_a_kind() -> None:
    offenders = []
    for path in sorted(APISERVER.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if KIND_BRANCH.search(line):
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == []


def test_every_builtin_kind_has_one_strategy() -> None:
    table = kinds.builtin_kinds()
    assert table.plurals() == sorted(meta.KINDS)
    for strategy in table:
        assert strategy.kind is meta.KINDS[strategy.plural]
