"""The watch cache holds objects compact: each once, as its stored bytes with its version, decoded on read; events
and their history hold bytes too, and replies are assembled from the bytes."""

from __future__ import annotations

import asyncio
from typing import Any

from caravanserai import meta, v1
from caravanserai.apiserver import codec, storedbytes
from caravanserai.apiserver.compactobjects import CompactObjects
from caravanserai.apiserver.watchcache import WatchCache
from caravanserai.apiserver.watchfanout import everything, selection
from caravanserai.storage.store import StoreEvent
from caravanserai.testing.builders import project
from caravanserai.text.selectors import FieldSelector, LabelSelector

PROJECTS = meta.KINDS["projects"]


def _project(name: str, *, node: str = "", team: str = "a") -> v1.Project:
    obj = project(name, labels={"team": team}, namespace="default")
    obj.metadata.uid = f"uid-{name}"
    obj.status.node_ref = node
    return obj


def _put(obj: v1.Project, revision: int, *, created: int, prev: bytes = b"") -> StoreEvent:
    return StoreEvent("PUT", meta.key_of(obj), codec.encode(obj), prev, revision, created)


def _cache() -> WatchCache:
    cache = WatchCache(None, PROJECTS)  # type: ignore[arg-type]  # events are applied by hand: no store is touched
    return cache


def _events(watcher: Any) -> list[tuple[str, str, str]]:
    """(type, name, resource version) of every event queued to `watcher`."""
    out = []
    while watcher.pending:
        event = v1.WatchEvent.FromString(asyncio.run(watcher.next(timeout=0)))
        out.append((event.type, event.object.project.metadata.name, event.object.project.metadata.resource_version))
    return out


def test_versioned_bytes_decode_to_the_stored_object_at_its_revision() -> None:
    obj = _project("web", node="n1")
    value = codec.encode(obj)
    blob = storedbytes.versioned(v1.Project, value, 42)
    assert v1.Project.FromString(blob) == codec.decode(v1.Project, value, 42)
    assert v1.Project.FromString(blob).metadata.resource_version == "42"
    again = storedbytes.versioned(v1.Project, blob, 43)  # a later version (a deletion's) overrides the first
    assert v1.Project.FromString(again) == codec.decode(v1.Project, value, 43)
    assert storedbytes.versioned(v1.Project, value, 0) == value


def test_replies_assembled_from_bytes_equal_the_messages() -> None:
    obj = codec.decode(v1.Project, codec.encode(_project("web")), 7)
    blob = storedbytes.versioned(v1.Project, codec.encode(obj), 7)
    assert v1.Object.FromString(storedbytes.envelope(PROJECTS, blob)) == PROJECTS.wrap(obj)
    event = v1.WatchEvent.FromString(storedbytes.watch_event(v1.MODIFIED, PROJECTS, blob))
    assert event == v1.WatchEvent(type=v1.MODIFIED, object=PROJECTS.wrap(obj))
    reply = b"".join([storedbytes.list_item(PROJECTS, blob)] * 2 + [storedbytes.list_trailer("9", "tok")])
    expected = v1.ListResponse(items=[PROJECTS.wrap(obj)] * 2, resource_version="9")
    setattr(expected, "continue", "tok")
    assert v1.ListResponse.FromString(reply) == expected


def test_large_objects_are_assembled_alike() -> None:
    config = v1.Config(metadata=v1.ObjectMeta(name="big", resource_version="12345678901"))
    config.spec.data["payload"] = "x" * 1_000_000  # lengths of three varint bytes
    blob = storedbytes.versioned(v1.Config, codec.encode(config), 12345678901)
    assert v1.Config.FromString(blob) == config
    item = v1.ListResponse.FromString(storedbytes.list_item(meta.KINDS["configs"], blob)).items[0]
    assert item == meta.KINDS["configs"].wrap(config)


def test_compact_objects_hold_bytes_and_decode_a_fresh_copy_on_every_read() -> None:
    objects = CompactObjects(v1.Project)
    obj = _project("web")
    blob = storedbytes.versioned(v1.Project, codec.encode(obj), 5)
    objects.put("default/web", blob)
    assert objects.blob("default/web") is blob and isinstance(objects._blobs["default/web"], bytes)
    first, second = objects["default/web"], objects.get("default/web")
    assert first == second == codec.decode(v1.Project, codec.encode(obj), 5)
    assert first is not second  # decoded afresh: nothing decoded is held
    assert "default/web" in objects and len(objects) == 1 and list(objects) == ["default/web"]
    assert objects.get("default/none") is None
    objects.remove("default/web")
    assert len(objects) == 0 and objects.blob("default/web") is None


def test_decoded_objects_are_kept_and_shared_when_asked() -> None:
    objects = CompactObjects(v1.Project, decoded=True)
    objects.put("default/web", storedbytes.versioned(v1.Project, codec.encode(_project("web")), 5))
    assert objects["default/web"] is objects.get("default/web")
    assert objects["default/web"].metadata.resource_version == "5"


def test_the_field_index_follows_puts_removals_and_relists() -> None:
    objects = CompactObjects(v1.Project)

    def put(name: str, node: str, revision: int) -> None:
        objects.put(
            f"default/{name}", storedbytes.versioned(v1.Project, codec.encode(_project(name, node=node)), revision)
        )

    put("a", "n1", 2)
    put("b", "n2", 3)
    assert objects.keys_where("status.nodeRef", "n1") == {"default/a"}  # built on first use
    put("b", "n1", 4)
    put("c", "n1", 5)
    assert objects.keys_where("status.nodeRef", "n1") == {"default/a", "default/b", "default/c"}
    assert objects.keys_where("status.nodeRef", "n2") == set()
    objects.remove("default/a")
    assert objects.keys_where("status.nodeRef", "n1") == {"default/b", "default/c"}
    objects.replace({"default/d": storedbytes.versioned(v1.Project, codec.encode(_project("d", node="n2")), 6)})
    assert objects.keys_where("status.nodeRef", "n1") == set()
    assert objects.keys_where("status.nodeRef", "n2") == {"default/d"}


def test_the_cache_holds_its_objects_and_history_as_bytes_only() -> None:
    cache = _cache()
    web = _project("web")
    cache._apply(_put(web, 2, created=2), history_only=False)
    web.status.node_ref = "n1"
    cache._apply(_put(web, 3, created=2, prev=codec.encode(_project("web"))), history_only=False)
    assert cache.get("default/web") == codec.decode(v1.Project, codec.encode(web), 3)
    assert isinstance(cache.objects.blob("default/web"), bytes)
    events = cache.history.after(0)
    assert [e.type for e in events] == [v1.ADDED, v1.MODIFIED]
    assert not any(e.decoded for e in events)  # released once offered: no decoded copy, no encoded event
    assert events[1].blob is cache.objects.blob("default/web")  # the history shares the cache's bytes
    assert events[1].prev_blob is events[0].blob
    cache._apply(StoreEvent("DELETE", "default/web", b"", b"", 4, 2), history_only=False)
    gone = cache.history.after(3)[0]
    assert gone.type == v1.DELETED and gone.obj.metadata.resource_version == "4" and gone.obj.status.node_ref == "n1"
    assert len(cache.objects) == 0


def test_selectors_still_filter_and_selection_changes_are_events() -> None:
    cache = _cache()
    labels = LabelSelector.parse("team=a")
    team_a = cache.watch(selection(labels, FieldSelector.parse("", kind="Project"), None), resource_version="")
    on_n1 = cache.watch(
        selection(LabelSelector.parse(""), FieldSelector.parse("status.nodeRef=n1", kind="Project"), None),
        resource_version="",
        index=("status.nodeRef", "n1"),
    )
    every = cache.watch(everything, resource_version="")
    web = _project("web", team="a")
    cache._apply(_put(web, 2, created=2), history_only=False)
    db = _project("db", team="b", node="n1")
    cache._apply(_put(db, 3, created=3), history_only=False)
    web.metadata.labels["team"] = "b"
    web.status.node_ref = "n1"
    cache._apply(_put(web, 4, created=2), history_only=False)
    assert _events(team_a) == [("ADDED", "web", "2"), ("DELETED", "web", "4")]
    assert _events(on_n1) == [("ADDED", "db", "3"), ("ADDED", "web", "4")]
    assert _events(every) == [("ADDED", "web", "2"), ("ADDED", "db", "3"), ("MODIFIED", "web", "4")]
    replay = cache.watch(selection(labels, FieldSelector.parse("", kind="Project"), None), resource_version="1")
    assert _events(replay) == [("ADDED", "web", "2"), ("DELETED", "web", "4")]
    assert not any(e.decoded for e in cache.history.after(0))
    current = cache.watch(
        selection(LabelSelector.parse("team=b"), FieldSelector.parse("", kind="Project"), None), resource_version="0"
    )
    assert sorted(_events(current)) == [("ADDED", "db", "3"), ("ADDED", "web", "4")]


def test_a_relist_dispatches_the_differences_and_keeps_unchanged_bytes() -> None:
    cache = _cache()
    web, db = _project("web"), _project("db")
    cache._apply(_put(web, 2, created=2), history_only=False)
    cache._apply(_put(db, 3, created=3), history_only=False)
    kept = cache.objects.blob("default/web")
    every = cache.watch(everything, resource_version="")
    api = _project("api")
    fresh = {
        "default/web": storedbytes.versioned(v1.Project, codec.encode(web), 2),
        "default/api": storedbytes.versioned(v1.Project, codec.encode(api), 9),
    }
    cache._dispatch_diff(fresh, 9)
    assert _events(every) == [("DELETED", "db", "9"), ("ADDED", "api", "9")]
    assert cache.objects.blob("default/web") is kept
    assert sorted(cache.objects) == ["default/api", "default/web"]
