"""What an apiserver makes sure of about namespaces before it serves: the `default` namespace exists, and every
object of a namespaced kind stored before namespaces existed (its key a bare name) has moved into it.

Guarantees:

* **Nothing lost, nothing twice.** Each object moves in one etcd transaction guarded on its old revision and on
  the new key being free: the object appears under "default/<name>" with `metadata.namespace` set, the rest of
  it (uid, versions of spec, finalizers, status, its lease for Events) unchanged, and vanishes from the old key.
  Several apiservers starting at once race harmlessly: an object moves once, a lost race is skipped.
* **Before serving.** `prepare` runs before the watch caches fill, so no client sees an object without its
  namespace. An apiserver of the previous release still running would write at the old keys: upgrade every
  apiserver together (a restart of the new one moves what it wrote meanwhile).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from caravanserai import meta, v1
from caravanserai.apiserver import codec
from caravanserai.apiserver.kinds import KindStrategy, KindTable
from caravanserai.apiserver.kinds.base import stamp
from caravanserai.errors import AlreadyExists
from caravanserai.storage import Store

log = structlog.get_logger(__name__)

RESOURCE = "namespaces"


def default_namespace(now: float) -> v1.Namespace:
    """The `default` namespace as the apiserver creates it."""
    namespace = v1.Namespace(
        api_version=v1.API_VERSION,
        kind="Namespace",
        metadata=v1.ObjectMeta(name=meta.DEFAULT_NAMESPACE, uid=str(uuid.uuid4()), generation=1),
        status=v1.NamespaceStatus(phase=v1.NAMESPACE_ACTIVE),
    )
    stamp(namespace.metadata.creation_timestamp, now)
    return namespace


async def ensure_default(store: Store, *, now: float) -> bool:
    """Create the `default` namespace unless it exists; True when this call created it."""
    try:
        await store.create(RESOURCE, meta.DEFAULT_NAMESPACE, codec.encode(default_namespace(now)))
    except AlreadyExists:
        return False
    log.info("created the default namespace")
    return True


async def move_into_default(store: Store, strategy: KindStrategy[Any]) -> int:
    """Move the objects of a namespaced kind stored without a namespace into `default`; how many this call moved."""
    moved = 0
    async for page in store.pages(strategy.plural):
        for item in page.items:
            if "/" in item.name:
                continue
            obj = codec.decode(strategy.kind.cls, item.value, 0)
            obj.metadata.namespace = meta.DEFAULT_NAMESPACE
            key = meta.join_key(meta.DEFAULT_NAMESPACE, item.name)
            value = codec.encode(obj)
            moved += await store.move(
                strategy.plural, item.name, key, value, expected_revision=item.mod_revision, lease=item.lease
            )
    return moved


class _Cache(Protocol):
    def get(self, name: str) -> Any | None: ...


def terminating(cache: _Cache) -> Callable[[str], bool]:
    """Is a namespace being deleted, as the namespaces' watch cache holds it (the authorizer's question)?"""

    def being_deleted(name: str) -> bool:
        found = cache.get(name)
        return found is not None and found.metadata.HasField("deletion_timestamp")

    return being_deleted


async def prepare(store: Store, kinds: KindTable, *, now: float) -> None:
    """`default` exists and every built-in namespaced kind's objects carry a namespace (see the module docstring)."""
    await ensure_default(store, now=now)
    for strategy in kinds:
        if strategy.kind.cluster_scoped or strategy.kind.custom:
            continue
        moved = await move_into_default(store, strategy)
        if moved:
            log.info(
                "moved objects stored before namespaces into the default namespace",
                resource=strategy.plural,
                moved=moved,
            )


__all__ = ["RESOURCE", "default_namespace", "ensure_default", "move_into_default", "prepare", "terminating"]
