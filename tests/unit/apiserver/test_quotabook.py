"""The quota book's entries: learned from reads, moved on by landed writes, dropped by failed ones, never replaced
by older ones; and the guards a write carries."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.apiserver.kinds.quotabook import MARKS, QUOTAS, QuotaBook
from caravanserai.storage.store import Also


def _quota(namespace: str, version: int, *, cohort: str = "", used: str = "0") -> v1.ResourceQuota:
    q = v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=namespace, resource_version=str(version)))
    q.spec.hard["cpu"] = "4"
    q.spec.cohort = cohort
    q.status.used["cpu"] = used
    return q


def _written(q: v1.ResourceQuota, used: str) -> tuple[Also, v1.ResourceQuota]:
    updated = v1.ResourceQuota()
    updated.CopyFrom(q)
    updated.status.used["cpu"] = used
    return Also(QUOTAS, f"{q.metadata.namespace}/{q.metadata.name}", b"new", int(q.metadata.resource_version)), updated


def test_a_write_carries_its_quotas_then_a_guard_for_everything_it_was_decided_on() -> None:
    book = QuotaBook()
    a, b = _quota("a", 10, cohort="pool"), _quota("b", 12, cohort="pool")
    view = book.learn_every([a, b], 20, "a", grows=True)
    write = _written(a, "1")
    also = book.guards(view, [write])
    assert also[0] is write[0]
    assert [(x.resource, x.key, x.expected_revision, x.guard) for x in also[1:]] == [
        (QUOTAS, "a/", 20, "quiet"),  # no quota of the namespace written since the read
        (QUOTAS, "b/team", 12, "equal"),  # the other member as read
        (MARKS, "pool/", 20, "quiet"),  # the cohort's membership as read
    ]


def test_a_landed_write_moves_the_entries_on_and_a_failed_one_drops_them() -> None:
    book = QuotaBook()
    a, b = _quota("a", 10, cohort="pool"), _quota("b", 12, cohort="pool")
    view = book.learn_every([a, b], 20, "a", grows=True)
    also = book.guards(view, [_written(a, "1")])
    assert also[1].settled is not None
    also[1].settled(25)
    kept = book.view("a", grows=True)
    assert kept is not None and kept.quotas.horizon == 25
    assert [q.status.used["cpu"] for q in kept.quotas.quotas] == ["1"]
    members = {q.metadata.namespace: q.metadata.resource_version for q in kept.cohorts["pool"].quotas}
    assert members == {"a": "25", "b": "12"} and kept.cohorts["pool"].horizon == 20
    failed = book.guards(kept, [_written(kept.quotas.quotas[0], "2")])
    assert failed[1].settled is not None
    failed[1].settled(None)
    assert book.view("a", grows=False) is None and book.view("b", grows=True) is None  # its cohort went too
    assert book.view("b", grows=False) is not None  # b's own quotas were not part of that write


def test_an_entry_is_never_replaced_by_an_older_one() -> None:
    book = QuotaBook()
    book.learn_namespace("a", [_quota("a", 30, used="3")], 40)
    book.learn_namespace("a", [_quota("a", 10, used="1")], 20)  # a read that started earlier, answered later
    kept = book.view("a", grows=False)
    assert kept is not None and kept.quotas.horizon == 40 and kept.quotas.quotas[0].status.used["cpu"] == "3"
    stale = book.learn_namespace("b", [], 5)
    book.learn_namespace("b", [], 50)
    also = book.guards(stale, [])
    assert also[0].settled is not None
    also[0].settled(None)  # the failed write used an entry that was replaced meanwhile: the newer one stays
    assert book.view("b", grows=False) is not None


def test_members_are_parsed_once_per_version() -> None:
    book = QuotaBook()
    q = _quota("a", 10, used="1")
    assert book.member(q) is book.member(q)
    assert book.member(_quota("a", 11, used="2")).used == {"cpu": 2000}
