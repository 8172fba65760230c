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
* **Cohorts** (`project.cohorts`): a growth of a namespace whose quota names a cohort is judged against the
  namespace's hard limits plus its borrowing limit and against the cohort's total, and the write is guarded on the
  version of every member quota it read (`Also.unchanged`, not rewritten): two namespaces can never both borrow
  the last unit. The namespace's quotas and the cohort's members come from one etcd read of every quota (one
  snapshot; a copy the watch cache holds at the same version is not decoded again), so a member the cache lags
  on, or lacks, is never missed, and any change after the read fails the guard (read and decide again). The watch
  cache only hints that the namespace has a cohort (then the one read serves both); when it does not know yet,
  the namespace's quotas are read first and every quota after.
"""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.apiserver import codec
from caravanserai.apiserver.kinds.base import KindContext
from caravanserai.errors import FailedPrecondition, Forbidden
from caravanserai.project import cohorts, lifecycle, quota
from caravanserai.storage.store import Also

QUOTAS = "resourcequotas"


async def quotas_of(ctx: KindContext, namespace: str) -> list[v1.ResourceQuota]:
    """The quotas of `namespace`, read from etcd: a quota created a moment ago counts even before the watch cache
    holds it (a stale copy would be caught by its version, a missing one would not)."""
    page = await ctx.store.list(QUOTAS, namespace=namespace)
    return [codec.decode(v1.ResourceQuota, item.value, item.mod_revision) for item in page.items]


async def every_quota(ctx: KindContext) -> list[v1.ResourceQuota]:
    """Every quota, read from etcd in one snapshot; a copy the watch cache holds at the same version is taken as it
    is (not decoded again)."""
    page = await ctx.store.list(QUOTAS)
    cache = ctx.caches.get(QUOTAS)
    out = []
    for item in page.items:
        found = cache.get(item.name) if cache is not None else None
        if found is None or int(found.metadata.resource_version) != item.mod_revision:
            found = codec.decode(v1.ResourceQuota, item.value, item.mod_revision)
        out.append(found)
    return out


def _cached(ctx: KindContext, namespace: str) -> list[v1.ResourceQuota] | None:
    """The namespace's quotas as the watch cache has them (a hint: it may lag); None without a cache."""
    cache = ctx.caches.get(QUOTAS)
    if cache is None:
        return None
    prefix = f"{namespace}/"
    return [q for key, q in cache.objects.items() if key.startswith(prefix)]


def cohorts_in_cache(ctx: KindContext, namespace: str) -> set[str]:
    """The cohorts the namespace's quotas name, as the watch cache has them (a hint: it may lag)."""
    return {q.spec.cohort for q in _cached(ctx, namespace) or [] if q.spec.cohort}


def locks(ctx: KindContext, old: v1.Project | None, new: v1.Project | None) -> list[str]:
    """The apiserver's locks a write that changes what the project holds takes: its namespace's, and one per cohort
    its namespace's quotas name; none for a write that changes nothing, or in a namespace without quotas (as the
    watch cache has them: a quota or a cohort it does not know yet only means that a concurrent write may make this
    one read again, never a write past a limit)."""
    if quota.charged(old) == quota.charged(new):
        return []
    project: Any = new if new is not None else old
    namespace = project.metadata.namespace
    cached = _cached(ctx, namespace)
    if cached == []:
        return []
    found = sorted({q.spec.cohort for q in cached or [] if q.spec.cohort})
    return [f"{QUOTAS}/{namespace}", *(f"{QUOTAS}/{cohorts.COHORT_KEY_PREFIX}{name}" for name in found)]


_MEMBERS: dict[str, tuple[str, cohorts.Member]] = {}
"""Members as last parsed, by quota key: (resource version, member). A version is never reused for other
contents, so a hit is exact."""


def _member(q: v1.ResourceQuota) -> cohorts.Member:
    key, version = meta.key_of(q), q.metadata.resource_version
    hit = _MEMBERS.get(key)
    if hit is not None and hit[0] == version and version:
        return hit[1]
    if len(_MEMBERS) > 100_000:  # removed quotas leave entries behind
        _MEMBERS.clear()
    parsed = cohorts.member(q)
    _MEMBERS[key] = (version, parsed)
    return parsed


def _limited(delta: quota.Amounts, limits: quota.Amounts) -> quota.Amounts:
    return {name: value for name, value in delta.items() if name in limits}


def lacks(
    quotas: list[v1.ResourceQuota],
    delta: quota.Amounts,
    members: dict[str, list[v1.ResourceQuota]] | None = None,
) -> list[str]:
    """What `delta` would exceed, one line per quota: "team-a: 3.5 of 4 cpu used, asks 1" (with a cohort, its
    borrowing limit and the cohort's total are judged instead of the hard limit: `cohorts.shortfall`)."""
    lines = []
    for q in quotas:
        hard = quota.parse(dict(q.spec.hard))
        if q.spec.cohort and members is not None:
            cohort = [_member(m) for m in members.get(q.spec.cohort, [])]
            short = cohorts.shortfall(_member(q), cohort, _limited(delta, hard), q.spec.cohort)
        else:
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
    quota.set_borrowed(updated.status, used, hard)
    return Also(QUOTAS, meta.key_of(q), codec.encode(updated), int(q.metadata.resource_version))


async def companions(ctx: KindContext, old: v1.Project | None, new: v1.Project | None, *, now: float) -> list[Also]:
    """The quotas to write with this project write (module docstring); may queue a new project or refuse."""
    delta = quota.difference(quota.charged(old), quota.charged(new))
    if not delta:
        return []
    project: Any = new if new is not None else old
    namespace = project.metadata.namespace
    grows = any(value > 0 for value in delta.values())
    every = await every_quota(ctx) if grows and cohorts_in_cache(ctx, namespace) else None
    quotas = [q for q in every if q.metadata.namespace == namespace] if every else await quotas_of(ctx, namespace)
    names = {q.spec.cohort for q in quotas if q.spec.cohort}
    if names and grows and every is None:  # the cache did not know the cohort yet
        every = await every_quota(ctx)
    members = {name: [q for q in every or [] if q.spec.cohort == name] for name in names} if grows else {}
    missing = lacks(quotas, delta, members)
    if missing:
        return _held_back(quotas, project.metadata.namespace, old, new, missing, now=now)
    writes = [also for q in quotas if (also := _charged(q, delta)) is not None]
    written = {also.key for also in writes}
    guards = {
        meta.key_of(m): Also.unchanged(QUOTAS, meta.key_of(m), int(m.metadata.resource_version))
        for cohort in members.values()
        for m in cohort
        if meta.key_of(m) not in written
    }
    return writes + [guards[key] for key in sorted(guards)]


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


__all__ = ["QUOTAS", "cohorts_in_cache", "companions", "every_quota", "lacks", "locks", "quotas_of"]
