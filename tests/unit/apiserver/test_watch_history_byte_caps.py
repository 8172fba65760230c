"""The watch history is bounded by bytes per kind and in total; a watcher behind the window relists."""

from __future__ import annotations

from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver.watchcache import WatchCache
from caravanserai.apiserver.watchfanout import CacheEvent
from caravanserai.apiserver.watchhistory import History, HistoryBudget, event_bytes
from caravanserai.errors import Expired

CONFIG = meta.KINDS["configs"]
VALUE_BYTES = 480 * 1024
KIND_CAP = 64 * 1024 * 1024
TOTAL_CAP = 96 * 1024 * 1024


def _config(revision: int, name: str = "big") -> Any:
    config = v1.Config(metadata=v1.ObjectMeta(name=name, resource_version=str(revision)))
    config.spec.data["payload"] = ("x" * (VALUE_BYTES - 8)) + f"{revision:08d}"
    return config


def _event(revision: int, prev: Any | None, name: str = "big") -> CacheEvent:
    type_ = v1.MODIFIED if prev is not None else v1.ADDED
    prev_blob = None if prev is None else prev.SerializeToString()
    return CacheEvent(revision, type_, _config(revision, name).SerializeToString(), prev_blob, CONFIG)


def test_1200_updates_of_a_480k_config_stay_under_the_kind_cap() -> None:
    history = History(100_000, max_bytes=KIND_CAP, budget=HistoryBudget(TOTAL_CAP))
    prev = None
    for revision in range(2, 1202):
        change = _event(revision, prev)
        history.append(change)
        prev = change.obj
        assert history.bytes <= KIND_CAP
    assert history.bytes == sum(event_bytes(e) for e in history.after(0))
    assert len(history) == KIND_CAP // event_bytes(change)
    assert history.oldest == 1201 - len(history)  # the newest events stay, the oldest went
    assert [e.revision for e in history.after(history.oldest)][-1] == 1201


def test_the_budget_bounds_every_kind_together_taking_from_the_largest() -> None:
    budget = HistoryBudget(TOTAL_CAP)
    configs = History(100_000, max_bytes=KIND_CAP, budget=budget)
    secrets = History(100_000, max_bytes=KIND_CAP, budget=budget)
    for revision in range(2, 400, 2):
        configs.append(_event(revision, None, "a"))
        secrets.append(_event(revision + 1, None, "b"))
        assert budget.used <= TOTAL_CAP
    assert configs.bytes <= TOTAL_CAP // 2 + event_bytes(_event(1, None))
    assert secrets.bytes > 0
    secrets.close()
    assert budget.used == configs.bytes


def _cache(**limits: Any) -> WatchCache:
    return WatchCache(None, CONFIG, **limits)  # type: ignore[arg-type]  # history only: no store is touched


def test_a_watcher_from_an_evicted_revision_is_told_to_relist() -> None:
    cache = _cache(history_bytes=8 * 1024 * 1024)
    prev = None
    for revision in range(2, 102):
        change = _event(revision, prev)
        cache._record(change)
        prev = change.obj
    oldest = cache.history.oldest
    assert oldest > 2
    with pytest.raises(Expired, match="too old resource version"):
        cache.watch(lambda _obj: True, resource_version="2")
    watcher = cache.watch(lambda _obj: True, resource_version=str(oldest))
    assert watcher.pending == 101 - oldest


def test_every_window_drops_what_etcd_compacted_and_serves_from_there() -> None:
    budget = HistoryBudget(TOTAL_CAP)
    caches = [_cache(history_budget=budget), _cache(history_budget=budget)]
    for revision in range(2, 42):
        caches[revision % 2]._record(_event(revision, None, f"n{revision}"))
    budget.forget_before(30)  # etcd compacted to revision 30
    for cache in caches:
        assert all(event.revision >= 30 for event in cache.history.after(0))
        assert len(cache.history) == 6 and cache.history.oldest in (28, 29)
        with pytest.raises(Expired):
            cache.watch(lambda _obj: True, resource_version="20")
    assert caches[0].watch(lambda _obj: True, resource_version="29").pending == 6  # 30, 32, … 40
    assert budget.used == sum(c.history.bytes for c in caches) == 12 * event_bytes(_event(30, None, "n30"))
