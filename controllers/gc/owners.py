"""The owner collector: deletes dependents whose owners are gone and carries out Foreground and Orphan deletions.

It works on every kind, built-in and custom, from shared informers (Kubernetes' garbage collector keeps its graph
the same way): one per built-in kind but events and leases (many, short-lived, never owners), and one per custom
kind, started when its ResourceDefinition appears in the definitions informer (the class registered through
`Client.discover`). One key (`SWEEP`) drives it: queued by any change of any of those objects and `resync` seconds
after each sweep (a safety net). A sweep builds the ownership graph from the caches (`ownergraph`) and acts on it.

Guarantees:

* **Never on stale state.** A dependent is deleted only after live reads show that no owner it references exists
  with the referenced uid (an owner recreated under the same name does not count), and the Delete carries the
  dependent's version as read (a dependent changed meanwhile waits for the next sweep). References are removed and
  finalizers dropped through Updates carrying the version read, so a concurrent writer wins and the sweep retries.
  Cached objects are never changed (live reads are changed instead).
* **Namespaces**: an owner of a namespaced kind is looked up in its namespaced dependent's namespace
  (`ownergraph.may_own`); for a cluster-wide dependent, in every namespace (by name and uid).
* **Background**: dependents of a deleted owner go at the next sweep (deleted with the Background policy, so
  their own dependents follow).
* **Foreground**: the owner (marked, finalizer `foregroundDeletion`) loses the finalizer — and so is removed —
  only when no dependent with blockOwnerDeletion is left in storage (live reads). Its dependents are deleted in
  the foreground too, so the whole tree below it goes first, as in Kubernetes.
* **Orphan**: the owner (marked, finalizer `orphan`) loses the finalizer only after every dependent dropped its
  reference to it; the dependents stay.
* A sweep waits until every informer it reads has synced (a kind's first list), so a kind just defined is not taken
  for empty. A failure on one object (Conflict, NotFound, a refusal) is logged and retried at the next sweep; it
  does not stop the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from caravanserai import meta
from caravanserai.client import Client
from caravanserai.controller import Controller, Result
from caravanserai.controllers.gc.ownergraph import Action, Node, OwnerGraph, blocking, plan_dependent, plan_owner
from caravanserai.errors import ApiError, NotFound
from caravanserai.informer import EventHandler, Informer, SharedInformerFactory

log = structlog.get_logger(__name__)

SWEEP = "owner-references"
"""The collector's one work-queue key."""
DEFAULT_OWNER_RESYNC = 30.0
SYNC_WAIT = 0.2
SKIPPED = frozenset({"events", "leases"})
"""Built-in kinds the collector does not follow (many, short-lived, never owners)."""


class OwnerCollector:
    """The reconciler of the owner collector (see the module docstring). `actions` counts what it did."""

    def __init__(
        self, client: Client, informers: SharedInformerFactory, *, resync: float = DEFAULT_OWNER_RESYNC
    ) -> None:
        self._client = client
        self._factory = informers
        self.resync = resync
        self.actions: dict[str, int] = {}
        self._wake: Callable[[], None] = lambda: None
        self._followed: dict[str, Informer[Any]] = {}  # plural → informer, every kind followed so far
        self._definitions = informers.informer("resourcedefinitions")
        self._served: set[str] = set()  # plurals of the custom kinds served at the last sweep

    def attach(self, controller: Controller) -> None:
        """Follow the built-in kinds and the definitions through `controller` (its queue gets `SWEEP` on any
        change); custom kinds are followed as their definitions appear."""
        self._wake = lambda: controller.enqueue(SWEEP)
        controller.watch(self._definitions, self._sweep_handler)
        for kind in meta.KINDS.values():
            if kind.plural not in SKIPPED:
                informer = self._factory.informer(kind.plural)
                self._followed[kind.plural] = informer
                if kind.plural != self._definitions.resource:
                    controller.watch(informer, self._sweep_handler)

    def _sweep_handler(self, _queue: Any) -> EventHandler[Any]:
        def wake(*_: Any) -> None:
            self._wake()

        return EventHandler(on_add=wake, on_update=wake, on_delete=wake, name="gc-owners-sweep")

    async def reconcile(self, key: str) -> Result:
        informers = await self._informers()
        if not all(informer.has_synced() for informer in informers.values()):
            return Result(requeue_after=SYNC_WAIT)
        graph = OwnerGraph.of(
            Node(meta.kind_for(plural), obj) for plural, informer in informers.items() for obj in informer.list()
        )
        for node in graph.nodes:
            try:
                await self._step(node, graph)
            except ApiError as exc:
                log.info("owner collection deferred", object=str(node), error=str(exc))
        return Result(requeue_after=self.resync)

    async def _informers(self) -> dict[str, Informer[Any]]:
        """The informers of every followed kind still served: built-in ones, and custom ones (started here when a
        definition is new)."""
        served = self._served = {d.spec.plural for d in self._definitions.list()}
        if served - set(self._followed):
            for kind in await self._client.discover():
                if kind.custom and kind.plural not in self._followed:
                    informer = self._factory.informer(kind.plural)
                    informer.add_event_handler(self._sweep_handler(None))
                    self._followed[kind.plural] = informer
                    log.info("following a custom kind", resource=kind.plural)
        return {
            plural: informer for plural, informer in self._followed.items() if plural in meta.KINDS or plural in served
        }

    async def _step(self, node: Node, graph: OwnerGraph) -> None:
        action = plan_owner(node)
        if action is Action.ORPHAN:
            await self._orphan(node, graph.dependents.get(node.uid, []))
        elif action is Action.FOREGROUND:
            await self._foreground(node, graph.dependents.get(node.uid, []))
        elif plan_dependent(node, graph) is Action.DELETE:
            await self._collect(node)

    # ---- Orphan -----------------------------------------------------------------------------------------------

    async def _orphan(self, owner: Node, dependents: list[Node]) -> None:
        for dependent in dependents:
            live = await self._live(dependent.kind, dependent.key, dependent.uid)
            if live is not None and meta.remove_owner(live, owner.uid):
                await self._client.resource(dependent.kind.plural).update(live)
                self._count("orphaned")
                log.info("orphaned", object=str(dependent), owner=str(owner))
        await self._drop_finalizer(owner, meta.FINALIZER_ORPHAN)

    # ---- Foreground -------------------------------------------------------------------------------------------

    async def _foreground(self, owner: Node, dependents: list[Node]) -> None:
        for dependent in dependents:
            if not dependent.deleting:
                await self._delete(
                    dependent,
                    reason=f"its owner {owner} is being deleted in the foreground",
                    policy=meta.PROPAGATION_FOREGROUND,
                )
        waiting = [d for d in blocking(owner.uid, dependents) if await self._exists(d)]
        if waiting:
            log.debug("foreground deletion waits", owner=str(owner), dependents=[str(d) for d in waiting])
            return
        await self._drop_finalizer(owner, meta.FINALIZER_FOREGROUND)

    # ---- Background: dependents of owners that are gone ---------------------------------------------------------

    async def _collect(self, dependent: Node) -> None:
        refs = list(dependent.obj.metadata.owner_references)
        for ref in refs:
            if await self._owner_exists(ref, dependent):
                return
        await self._delete(dependent, reason="every owner is gone")

    async def _owner_exists(self, ref: Any, dependent: Node) -> bool:
        """A live read of the owner `ref` names (in `dependent`'s namespace for a namespaced kind): False only when
        no object of that kind and name has its uid, or when the owner is of a custom kind no longer served (deleting
        a definition deletes its objects). An owner of a kind this process cannot resolve counts as present (never
        delete on a guess); a namespaced owner of a cluster-wide dependent is looked for in every namespace."""
        try:
            kind = meta.kind_named(ref.kind)
        except KeyError:
            log.debug("owner of an unknown kind; keeping its dependents", kind=ref.kind, name=ref.name)
            return True
        if kind.custom and kind.plural not in self._served:
            return False
        if kind.cluster_scoped:
            return await self._live(kind, ref.name, ref.uid) is not None
        if not dependent.namespace:
            listed = await self._client.resource(kind.plural).list(field_selector=f"metadata.name={ref.name}")
            return any(obj.metadata.uid == ref.uid for obj in listed)
        return await self._live(kind, meta.join_key(dependent.namespace, ref.name), ref.uid) is not None

    # ---- helpers ----------------------------------------------------------------------------------------------

    async def _live(self, kind: meta.Kind, name: str, uid: str) -> Any | None:
        """The stored object `kind`/`name` (a key) when it still has `uid`, else None."""
        try:
            obj = await self._client.resource(kind.plural).get(name)
        except NotFound:
            return None
        return obj if obj.metadata.uid == uid else None

    async def _exists(self, node: Node) -> bool:
        return await self._live(node.kind, node.key, node.uid) is not None

    async def _delete(self, node: Node, *, reason: str, policy: str = meta.PROPAGATION_BACKGROUND) -> None:
        live = await self._live(node.kind, node.key, node.uid)
        if live is None or live.metadata.HasField("deletion_timestamp"):
            return
        try:
            await self._client.resource(node.kind.plural).delete(
                node.key, resource_version=live.metadata.resource_version, propagation_policy=policy
            )
        except NotFound:
            return
        self._count("deleted")
        log.info("collected", object=str(node), reason=reason)

    async def _drop_finalizer(self, owner: Node, finalizer: str) -> None:
        live = await self._live(owner.kind, owner.key, owner.uid)
        if live is None or finalizer not in live.metadata.finalizers:
            return
        live.metadata.finalizers.remove(finalizer)
        await self._client.resource(owner.kind.plural).update(live)
        self._count(f"finalized-{finalizer}")
        log.info("owner released", object=str(owner), finalizer=finalizer)

    def _count(self, what: str) -> None:
        self.actions[what] = self.actions.get(what, 0) + 1


__all__ = ["DEFAULT_OWNER_RESYNC", "SKIPPED", "SWEEP", "OwnerCollector"]
