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
  version of every member quota it read (`Also.unchanged`, not rewritten) and on the cohort's membership
  (`kinds.quotabook`): two namespaces can never both borrow the last unit, and a member that joined meanwhile is
  never missed.
* **Read once, then guarded** (`kinds.quotabook`): the quotas a write is decided on come from what this apiserver
  kept from its earlier reads and writes, guarded so that the write lands only while they are current (any quota
  of the namespace created, changed or removed since, or a cohort's membership changed, fails it: read from etcd
  and decide again). Only a write with nothing kept reads etcd: the namespace's quotas, or every quota in one
  snapshot when they name a cohort (the watch cache hints that). A write that would not fit is decided again on
  a fresh read before it is held back or refused.
"""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.apiserver import codec
from caravanserai.apiserver.kinds.base import KindContext
from caravanserai.apiserver.kinds.quotabook import QUOTAS, QuotaBook, View
from caravanserai.errors import FailedPrecondition, Forbidden
from caravanserai.project import cohorts, lifecycle, quota
from caravanserai.storage.store import Also, StoredObject


def _decoded(ctx: KindContext, items: list[StoredObject]) -> list[v1.ResourceQuota]:
    """Quotas as read from etcd; a copy the watch cache holds at the same version is taken as it is."""
    cache = ctx.caches.get(QUOTAS)
    out = []
    for item in items:
        found = cache.get(item.name) if cache is not None else None
        if found is None or int(found.metadata.resource_version) != item.mod_revision:
            found = codec.decode(v1.ResourceQuota, item.value, item.mod_revision)
        out.append(found)
    return out


async def _view(ctx: KindContext, namespace: str, *, grows: bool, kept: bool) -> View:
    """What a write in `namespace` is decided on: the book's kept view when `kept` and it has one, else read from
    etcd (the namespace's quotas, or every quota in one snapshot when the write grows and the namespace's quotas
    may name a cohort, as the watch cache or the book says)."""
    book = ctx.quota_book
    view = book.view(namespace, grows=grows) if kept else None
    if view is not None:
        return view
    if not (grows and (cohorts_in_cache(ctx, namespace) or book.names_cohort(namespace))):
        page = await ctx.store.list(QUOTAS, namespace=namespace)
        view = book.learn_namespace(namespace, _decoded(ctx, page.items), page.revision)
        if not (grows and any(q.spec.cohort for q in view.quotas.quotas)):
            return view
    page = await ctx.store.list(QUOTAS)
    return book.learn_every(_decoded(ctx, page.items), page.revision, namespace, grows=grows)


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
    kept = ctx.quota_book.view(namespace, grows=False)
    cached = list(kept.quotas.quotas) if kept is not None else _cached(ctx, namespace)
    if cached == []:
        return []
    found = sorted({q.spec.cohort for q in cached or [] if q.spec.cohort})
    return [f"{QUOTAS}/{namespace}", *(f"{QUOTAS}/{cohorts.COHORT_KEY_PREFIX}{name}" for name in found)]


def _limited(delta: quota.Amounts, limits: quota.Amounts) -> quota.Amounts:
    return {name: value for name, value in delta.items() if name in limits}


def lacks(view: View, delta: quota.Amounts, book: QuotaBook) -> list[str]:
    """What `delta` would exceed of the quotas of `view`, one line per quota: "team-a: 3.5 of 4 cpu used, asks 1"
    (with a cohort, its borrowing limit and the cohort's total are judged instead of the hard limit:
    `cohorts.shortfall`; quotas parsed through `book`)."""
    lines = []
    for q in view.quotas.quotas:
        own = book.member(q)
        if q.spec.cohort:
            members = view.cohorts.get(q.spec.cohort)
            cohort = [book.member(m) for m in (members.quotas if members is not None else ())]
            short = cohorts.shortfall(own, cohort, _limited(delta, own.hard), q.spec.cohort)
        else:
            short = quota.shortfall(own.used, _limited(delta, own.hard), own.hard)
        if short:
            lines.append(f"{q.metadata.name}: {'; '.join(short)}")
    return lines


def _charged(q: v1.ResourceQuota, own: cohorts.Member, delta: quota.Amounts) -> tuple[Also, v1.ResourceQuota] | None:
    """`q` with `delta` added to its use (`own`: `q` parsed), as a companion write; None when it limits none of it."""
    hard = own.hard
    limited = _limited(delta, hard)
    if not limited:
        return None
    used = dict(own.used)
    for name, value in limited.items():
        used[name] = max(0, used.get(name, 0) + value)
    updated = meta.copy(q)
    updated.status.used.clear()
    updated.status.used.update(quota.render(used, hard))
    updated.status.hard.clear()
    updated.status.hard.update(q.spec.hard)
    quota.set_borrowed(updated.status, used, hard)
    return Also(QUOTAS, meta.key_of(q), codec.encode(updated), int(q.metadata.resource_version)), updated


async def companions(ctx: KindContext, old: v1.Project | None, new: v1.Project | None, *, now: float) -> list[Also]:
    """The quotas to write with this project write, and the guards that it was decided on quotas still current
    (module docstring); may queue a new project or refuse. A write that would not fit is decided again on quotas
    read from etcd just now: what this apiserver kept never holds a project back."""
    delta = quota.difference(quota.charged(old), quota.charged(new))
    if not delta:
        return []
    project: Any = new if new is not None else old
    namespace = project.metadata.namespace
    grows = any(value > 0 for value in delta.values())
    view = await _view(ctx, namespace, grows=grows, kept=True)
    book = ctx.quota_book
    missing = lacks(view, delta, book)
    if missing and not view.read:
        view = await _view(ctx, namespace, grows=grows, kept=False)
        missing = lacks(view, delta, book)
    if missing:
        return _held_back(list(view.quotas.quotas), namespace, old, new, missing, now=now)
    writes = [charged for q in view.quotas.quotas if (charged := _charged(q, book.member(q), delta)) is not None]
    return book.guards(view, writes)


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


__all__ = ["QUOTAS", "cohorts_in_cache", "companions", "lacks", "locks"]
