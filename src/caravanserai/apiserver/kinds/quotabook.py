"""What one apiserver knows of the quotas project writes are judged against, kept between its writes so that a write
reads etcd only after something else changed them (`kinds/project/quotarules.py` decides; this keeps).

Guarantees:

* **Snapshots, never hints.** An entry holds the quotas of one namespace, or the members of one cohort, as read
  from etcd in one snapshot or as left by a write of this apiserver. A write decided on entries carries guards
  (`View.guards`) under which it lands only while they still hold:
  - a namespace: no quota of the namespace created or written after the entry's horizon (`Also.quiet` over its
    keys), and each quota it holds still at its version (one removed since fails that);
  - a cohort: its marker (`MARKS`, key "<cohort>/mark", written by every quota write that makes a quota join or
    leave the cohort: `kinds.resourcequota`) not written after the entry's horizon, and each member still at its
    version.
* **Own writes keep it current.** When a guarded write lands at revision W, the namespace's entry holds at W with
  the quotas it wrote, and every cohort entry holding one of them holds its new version: writes that follow each
  other through this apiserver read nothing. When it fails, or its outcome is unknown, the entries it used are
  dropped and the next write reads etcd again. An entry is only ever replaced by a newer one.
* **Bounded.** At most `LIMIT` namespaces and cohorts each (beyond, the book starts again empty).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.project import cohorts
from caravanserai.storage.store import Also

QUOTAS = "resourcequotas"
MARKS = "cohortmarks"
"""The store directory of cohort markers (not a kind: nothing but these guards reads it)."""
LIMIT = 10_000


def mark_key(cohort: str) -> str:
    """The store key of `cohort`'s marker."""
    return f"{cohort}/mark"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Quotas as they were at revision `horizon` (for a cohort: its membership then; each member at its version)."""

    horizon: int
    quotas: tuple[v1.ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class View:
    """What one write is decided on: its namespace's quotas and, when it grows, the cohorts they name."""

    namespace: str
    quotas: Snapshot
    cohorts: dict[str, Snapshot] = field(default_factory=dict)
    read: bool = False  # read from etcd for this write (not kept from earlier ones)


class QuotaBook:
    """One apiserver's entries (module docstring); every method is synchronous, so entries change atomically."""

    def __init__(self) -> None:
        self._namespaces: dict[str, Snapshot] = {}
        self._cohorts: dict[str, Snapshot] = {}
        self._parsed: dict[str, tuple[str, cohorts.Member]] = {}

    def view(self, namespace: str, *, grows: bool) -> View | None:
        """The kept view for a write in `namespace` (with the cohorts its quotas name when it `grows`); None when
        an entry it needs is missing."""
        snap = self._namespaces.get(namespace)
        if snap is None:
            return None
        found = {}
        for name in _cohorts_of(snap.quotas) if grows else ():
            member = self._cohorts.get(name)
            if member is None:
                return None
            found[name] = member
        return View(namespace, snap, found)

    def names_cohort(self, namespace: str) -> bool:
        """Whether the kept quotas of `namespace` name a cohort."""
        snap = self._namespaces.get(namespace)
        return snap is not None and bool(_cohorts_of(snap.quotas))

    def learn_namespace(self, namespace: str, quotas: list[v1.ResourceQuota], revision: int) -> View:
        """The namespace's quotas as read at `revision`, kept; its view (no cohorts)."""
        snap = Snapshot(revision, tuple(quotas))
        self._keep(self._namespaces, namespace, snap)
        return View(namespace, snap, read=True)

    def learn_every(self, quotas: list[v1.ResourceQuota], revision: int, namespace: str, *, grows: bool) -> View:
        """Every quota as read at `revision`, kept per namespace and per cohort; the view of `namespace`."""
        by_namespace: dict[str, list[v1.ResourceQuota]] = {namespace: []}
        by_cohort: dict[str, list[v1.ResourceQuota]] = {}
        for q in quotas:
            by_namespace.setdefault(q.metadata.namespace, []).append(q)
            if q.spec.cohort:
                by_cohort.setdefault(q.spec.cohort, []).append(q)
        for name, held in by_namespace.items():
            self._keep(self._namespaces, name, Snapshot(revision, tuple(held)))
        for name, held in by_cohort.items():
            self._keep(self._cohorts, name, Snapshot(revision, tuple(held)))
        snap = Snapshot(revision, tuple(by_namespace[namespace]))
        names = _cohorts_of(snap.quotas) if grows else ()
        found = {name: Snapshot(revision, tuple(by_cohort.get(name, ()))) for name in names}
        return View(namespace, snap, found, read=True)

    def member(self, q: v1.ResourceQuota) -> cohorts.Member:
        """`q` as cohort arithmetic, parsed once per version."""
        key, version = meta.key_of(q), q.metadata.resource_version
        hit = self._parsed.get(key)
        if hit is not None and hit[0] == version and version:
            return hit[1]
        if len(self._parsed) >= LIMIT:
            self._parsed.clear()
        parsed = cohorts.member(q)
        self._parsed[key] = (version, parsed)
        return parsed

    def guards(self, view: View, writes: list[tuple[Also, v1.ResourceQuota]]) -> list[Also]:
        """The companions of a write decided on `view`: `writes` (each quota's new content, as encoded in its
        `Also`), then the guards that make it land only while `view` holds; the first guard reports the outcome
        back to this book."""
        written = {also.key for also, _ in writes}
        quiet = Also.quiet(
            QUOTAS,
            f"{view.namespace}/",
            view.quotas.horizon,
            settled=lambda revision: self._settled(view, writes, revision),
        )
        guards = [quiet]
        seen = set(written)
        for q in (*view.quotas.quotas, *(m for snap in view.cohorts.values() for m in snap.quotas)):
            key = meta.key_of(q)
            if key not in seen:
                seen.add(key)
                guards.append(Also.unchanged(QUOTAS, key, int(q.metadata.resource_version)))
        for name, snap in sorted(view.cohorts.items()):
            guards.append(Also.quiet(MARKS, f"{name}/", snap.horizon))
        return [also for also, _ in writes] + guards

    def _settled(self, view: View, writes: list[tuple[Also, v1.ResourceQuota]], revision: int | None) -> None:
        if revision is None:
            if self._namespaces.get(view.namespace) is view.quotas:
                del self._namespaces[view.namespace]
            for name, snap in view.cohorts.items():
                if self._cohorts.get(name) is snap:
                    del self._cohorts[name]
            return
        landed = {}
        for _, q in writes:  # each the write's own copy, now stored at `revision`
            q.metadata.resource_version = str(revision)
            landed[meta.key_of(q)] = q
        quotas = tuple(landed.get(meta.key_of(q), q) for q in view.quotas.quotas)
        self._keep(self._namespaces, view.namespace, Snapshot(revision, quotas))
        for key, stored in landed.items():
            cohort = self._cohorts.get(stored.spec.cohort) if stored.spec.cohort else None
            if cohort is not None:
                members = tuple(_newer(stored, m) if meta.key_of(m) == key else m for m in cohort.quotas)
                self._cohorts[stored.spec.cohort] = Snapshot(cohort.horizon, members)

    @staticmethod
    def _keep(entries: dict[str, Snapshot], name: str, snap: Snapshot) -> None:
        """Keep `snap` unless a newer one is kept already."""
        kept = entries.get(name)
        if kept is not None and kept.horizon >= snap.horizon:
            return
        if kept is None and len(entries) >= LIMIT:
            entries.clear()
        entries[name] = snap


def _newer(landed: v1.ResourceQuota | None, kept: v1.ResourceQuota) -> v1.ResourceQuota:
    if landed is None or int(landed.metadata.resource_version) <= int(kept.metadata.resource_version or 0):
        return kept
    return landed


def _cohorts_of(quotas: Iterable[v1.ResourceQuota]) -> list[str]:
    return sorted({q.spec.cohort for q in quotas if q.spec.cohort})


__all__ = ["LIMIT", "MARKS", "QUOTAS", "QuotaBook", "Snapshot", "View", "mark_key"]
