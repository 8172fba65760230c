"""Quota accounting of projects, the apiserver's half (what a project costs and whether it fits: `project.quota`).

Guarantees:

* **In the same transaction.** A project write that changes what the project holds of its namespace's quotas (a
  create, an admission Queued → Pending, a spec change of an admitted project, a phase change to a finished
  phase, a removal) writes each quota's new `status.used` in the same etcd transaction, guarded on the quota's
  version: two writes can never both take the last slot, and a quota changed meanwhile makes the service read it
  again from etcd and decide again (`CompanionChanged`), never the caller's conflict.
* **A create that does not fit** is held back in phase Queued (policy Queue, the default: it takes nothing until
  the queue controller admits it) or refused naming the quota and what it lacks (policy Reject, as Kubernetes).
* **Other writes that would grow past a limit** (an admission that no longer fits, a spec asking for more) are
  refused (FailedPrecondition). Writes that keep or lower usage always pass, so a quota lowered below current use
  stops new work only.
"""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.apiserver import codec
from caravanserai.apiserver.kinds.base import KindContext
from caravanserai.errors import FailedPrecondition, Forbidden
from caravanserai.project import lifecycle, quota
from caravanserai.storage.store import Also

QUOTAS = "resourcequotas"


async def quotas_of(ctx: KindContext, namespace: str) -> list[v1.ResourceQuota]:
    """The quotas of `namespace`, read from etcd: a quota created a moment ago counts even before the watch cache
    holds it (a stale copy would be caught by its version, a missing one would not)."""
    page = await ctx.store.list(QUOTAS, namespace=namespace)
    return [codec.decode(v1.ResourceQuota, item.value, item.mod_revision) for item in page.items]


def _limited(delta: quota.Amounts, limits: quota.Amounts) -> quota.Amounts:
    return {name: value for name, value in delta.items() if name in limits}


def lacks(quotas: list[v1.ResourceQuota], delta: quota.Amounts) -> list[str]:
    """What `delta` would exceed, one line per quota: "team-a: 3.5 of 4 cpu used, asks 1"."""
    lines = []
    for q in quotas:
        hard = quota.parse(dict(q.spec.hard))
        short = quota.shortfall(quota.parse(dict(q.status.used)), _limited(delta, hard), hard)
        if short:
            lines.append(f"{q.metadata.name}: {'; '.join(short)}")
    return lines


def _charged(q: v1.ResourceQuota, delta: quota.Amounts) -> Also | None:
    hard = quota.parse(dict(q.spec.hard))
    limited = _limited(delta, hard)
    if not limited:
        return None
    used = quota.parse(dict(q.status.used))
    for name, value in limited.items():
        used[name] = max(0, used.get(name, 0) + value)
    updated = meta.copy(q)
    updated.status.used.clear()
    updated.status.used.update(quota.render(used, hard))
    updated.status.hard.clear()
    updated.status.hard.update(q.spec.hard)
    return Also(QUOTAS, meta.key_of(q), codec.encode(updated), int(q.metadata.resource_version))


async def companions(ctx: KindContext, old: v1.Project | None, new: v1.Project | None, *, now: float) -> list[Also]:
    """The quotas to write with this project write (module docstring); may queue a new project or refuse."""
    delta = quota.difference(quota.charged(old), quota.charged(new))
    if not delta:
        return []
    project: Any = new if new is not None else old
    quotas = await quotas_of(ctx, project.metadata.namespace)
    missing = lacks(quotas, delta)
    if missing:
        return _held_back(quotas, project.metadata.namespace, old, new, missing, now=now)
    return [also for q in quotas if (also := _charged(q, delta)) is not None]


def _held_back(
    quotas: list[v1.ResourceQuota],
    namespace: str,
    old: v1.Project | None,
    new: v1.Project | None,
    missing: list[str],
    *,
    now: float,
) -> list[Also]:
    if old is None and new is not None:
        hard_stop = [q.metadata.name for q in quotas if q.spec.policy == v1.QUOTA_REJECT]
        if hard_stop:
            raise Forbidden(f"exceeded quota in namespace {namespace}: " + "; ".join(missing))
        lifecycle.queue(new, f"waiting for quota: {'; '.join(missing)}", now=now)
        return []
    raise FailedPrecondition(f"exceeds the quota of namespace {namespace}: " + "; ".join(missing))


__all__ = ["QUOTAS", "companions", "lacks", "quotas_of"]
