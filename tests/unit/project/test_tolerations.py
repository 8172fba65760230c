"""The toleration rule and how long a project stays on a NotReady node (the built-in not-ready taint)."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.project.tolerations import not_ready_grace, tolerates


def toleration(
    key: str = "", operator: str = "", value: str = "", effect: str = "", seconds: int | None = None
) -> v1.Toleration:
    t = v1.Toleration(key=key, operator=operator, value=value, effect=effect)
    if seconds is not None:
        t.toleration_seconds = seconds
    return t


@pytest.mark.parametrize(
    ("tolerations", "grace"),
    [
        ([], 180.0),  # the controller's default
        ([toleration("dedicated", "Exists", effect="NoExecute", seconds=5)], 180.0),  # another taint
        ([toleration("node.caravanserai.io/not-ready", "Exists", effect="NoExecute", seconds=2)], 2.0),
        ([toleration("node.caravanserai.io/unreachable", "Exists", seconds=30)], 30.0),  # any effect
        ([toleration("node.caravanserai.io/not-ready", "Exists", effect="NoSchedule", seconds=2)], 180.0),
        ([toleration("node.caravanserai.io/not-ready", effect="NoExecute", seconds=2)], 2.0),  # Equal, empty value
        ([toleration("node.caravanserai.io/not-ready", "Exists", effect="NoExecute")], None),  # forever
        ([toleration(operator="Exists")], None),  # tolerates every taint, forever (as Kubernetes)
        (
            [
                toleration("node.caravanserai.io/not-ready", "Exists", seconds=2),
                toleration("node.caravanserai.io/unreachable", "Exists", seconds=20),
            ],
            20.0,  # the longest matching one
        ),
    ],
)
def test_not_ready_grace(tolerations: list[v1.Toleration], grace: float | None) -> None:
    assert not_ready_grace(tolerations, 180.0) == grace


def test_the_matching_rule() -> None:
    assert tolerates(toleration("k", "Equal", "v", "NoSchedule"), "k", "v", "NoSchedule")
    assert not tolerates(toleration("k", "Equal", "v"), "k", "w", "NoSchedule")
    assert tolerates(toleration("k", "Exists"), "k", "anything", "NoExecute")
    assert not tolerates(toleration("k", "Exists", effect="NoSchedule"), "k", "", "NoExecute")
