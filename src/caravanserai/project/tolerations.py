"""Taints and tolerations as a project reads them: Kubernetes' matching rule, and the built-in taints of a node
that stopped heartbeating.

* **Matching** (`tolerates`): a toleration matches a taint when its effect is empty or equal, and with operator
  `Exists` its key is empty (every taint) or equal, with `Equal` (the default) key and value are equal. The
  scheduler's filters, placement upkeep and node health all use this one rule.
* **The built-in NoExecute taints** `node.caravanserai.io/not-ready` and `node.caravanserai.io/unreachable` are
  what a NotReady node implies (node health's NotReady is a missed heartbeat: Kubernetes calls it unreachable;
  both keys are accepted). They are not written to `spec.taints`: node health evaluates a project's tolerations
  against them while the node is NotReady (`not_ready_grace`).
* **How long a project stays on a NotReady node** (`not_ready_grace`): without a matching toleration, the
  controller's default grace period (as Kubernetes' default toleration of 300 s); with matching tolerations that
  all carry `tolerationSeconds`, the longest of them; with one that carries none, forever (never moved).
"""

from __future__ import annotations

from collections.abc import Iterable

from caravanserai import v1

EXISTS = "Exists"
EQUAL = "Equal"
NO_EXECUTE = "NoExecute"
TAINT_NOT_READY = "node.caravanserai.io/not-ready"
TAINT_UNREACHABLE = "node.caravanserai.io/unreachable"
NOT_READY_TAINTS = (TAINT_NOT_READY, TAINT_UNREACHABLE)


def tolerates(toleration: v1.Toleration, key: str, value: str, effect: str) -> bool:
    """Whether `toleration` matches the taint `key=value:effect` (Kubernetes' rules)."""
    return matches(
        toleration.key, toleration.operator or EQUAL, toleration.value, toleration.effect, key, value, effect
    )


def matches(t_key: str, operator: str, t_value: str, t_effect: str, key: str, value: str, effect: str) -> bool:
    """The matching rule over plain values: a toleration (`t_key`, `operator`, `t_value`, `t_effect`) against a
    taint (`key`, `value`, `effect`)."""
    if t_effect and t_effect != effect:
        return False
    if operator == EXISTS:
        return not t_key or t_key == key
    return t_key == key and t_value == value


def not_ready_grace(tolerations: Iterable[v1.Toleration], default: float) -> float | None:
    """Seconds a Running project stays on a NotReady node before it is moved (None: forever), from its tolerations
    of the built-in not-ready/unreachable taints; `default` when it has none."""
    matching = [t for t in tolerations if any(tolerates(t, key, "", NO_EXECUTE) for key in NOT_READY_TAINTS)]
    if not matching:
        return default
    if any(not t.HasField("toleration_seconds") for t in matching):
        return None
    return float(max(t.toleration_seconds for t in matching))


__all__ = [
    "EQUAL",
    "EXISTS",
    "NOT_READY_TAINTS",
    "NO_EXECUTE",
    "TAINT_NOT_READY",
    "TAINT_UNREACHABLE",
    "matches",
    "not_ready_grace",
    "tolerates",
]
