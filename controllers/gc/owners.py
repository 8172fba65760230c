"""The owner collector: deletes dependents whose owners are gone and carries out Foreground and Orphan deletions.

It works on every kind, built-in and custom: each sweep lists the built-in kinds (all but events) and every custom
kind the server serves (found through the ResourceDefinitions, `Client.discover`), builds the ownership graph
(`ownergraph`) and acts on it. One key (`SWEEP`) drives it: queued by any change of a project or a definition and
again `resync` seconds after each sweep, so changes of other kinds are seen within that period.

Guarantees:

* **Never on stale state.** A dependent is deleted only after live reads show that no owner it references exists
  with the referenced uid (an owner recreated under the same name does not count), and the Delete carries the
  dependent's version as read (a dependent changed meanwhile waits for the next sweep). References are removed and
  finalizers dropped through Updates carrying the version read, so a concurrent writer wins and the sweep retries.
* **Background**: dependents of a deleted owner go at the next sweep (deleted with the Background policy, so
  their own dependents follow).
* **Foreground**: the owner (marked, finalizer `foregroundDeletion`) loses the finalizer — and so is removed —
  only when no dependent with blockOwnerDeletion is left in storage.
* **Orphan**: the owner (marked, finalizer `orphan`) loses the finalizer only after every dependent dropped its
  reference to it; the dependents stay.
* A failure on one object (Conflict, NotFound, a refusal) is logged and retried at the next sweep; it does not stop
  the others.
"""

from __future__ import annotations

from typing import Any

import structlog

from caravanserai import meta
from caravanserai.client import Client
from caravanserai.controller import Result
from caravanserai.controllers.gc.ownergraph import Action, Node, OwnerGraph, blocking, plan_dependent, plan_owner
from caravanserai.errors import ApiError, NotFound

log = structlog.get_logger(__name__)

SWEEP = "owner-references"
"""The collector's one work-queue key."""
DEFAULT_OWNER_RESYNC = 2.0
SKIPPED = frozenset({"events"})
"""Kinds the collector does not list (many, short-lived, never owners)."""


class OwnerCollector:
    """The reconciler of the owner collector (see the module docstring). `actions` counts what it did."""

    def __init__(self, client: Client, *, resync: float = DEFAULT_OWNER_RESYNC) -> None:
        self._client = client
        self.resync = resync
        self.actions: dict[str, int] = {}

    async def reconcile(self, key: str) -> Result:
        graph = OwnerGraph.of(await self._list_all())
        for node in graph.nodes:
            try:
                await self._step(node, graph)
            except ApiError as exc:
                log.info("owner collection deferred", object=str(node), error=str(exc))
        return Result(requeue_after=self.resync)

    async def _kinds(self) -> list[meta.Kind]:
        builtin = [k for k in meta.KINDS.values() if k.plural not in SKIPPED]
        return [*builtin, *(k for k in await self._client.discover() if k.custom)]

    async def _list_all(self) -> list[Node]:
        nodes: list[Node] = []
        for kind in await self._kinds():
            try:
                listed = await self._client.resource(kind.plural).list()
            except NotFound:
                continue  # a custom kind deleted meanwhile
            nodes.extend(Node(kind, obj) for obj in listed.items)
        return nodes

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
            live = await self._live(dependent.kind, dependent.name, dependent.uid)
            if live is not None and meta.remove_owner(live, owner.uid):
                await self._client.resource(dependent.kind.plural).update(live)
                self._count("orphaned")
                log.info("orphaned", object=str(dependent), owner=str(owner))
        await self._drop_finalizer(owner, meta.FINALIZER_ORPHAN)

    # ---- Foreground -------------------------------------------------------------------------------------------

    async def _foreground(self, owner: Node, dependents: list[Node]) -> None:
        for dependent in dependents:
            if not dependent.deleting:
                await self._delete(dependent, reason=f"its owner {owner} is being deleted in the foreground")
        waiting = [d for d in blocking(owner.uid, dependents) if await self._exists(d)]
        if waiting:
            log.debug("foreground deletion waits", owner=str(owner), dependents=[str(d) for d in waiting])
            return
        await self._drop_finalizer(owner, meta.FINALIZER_FOREGROUND)

    # ---- Background: dependents of owners that are gone ---------------------------------------------------------

    async def _collect(self, dependent: Node) -> None:
        refs = list(dependent.obj.metadata.owner_references)
        for ref in refs:
            if await self._owner_exists(ref):
                return
        await self._delete(dependent, reason="every owner is gone")

    async def _owner_exists(self, ref: Any) -> bool:
        """A live read of the owner `ref` names: False only when no object of that kind and name has its uid. An
        owner of a kind this process cannot resolve counts as present (never delete on a guess)."""
        try:
            kind = meta.kind_named(ref.kind)
        except KeyError:
            log.warning("owner of an unknown kind; keeping its dependents", kind=ref.kind, name=ref.name)
            return True
        return await self._live(kind, ref.name, ref.uid) is not None

    # ---- helpers ----------------------------------------------------------------------------------------------

    async def _live(self, kind: meta.Kind, name: str, uid: str) -> Any | None:
        """The stored object `kind`/`name` when it still has `uid`, else None."""
        try:
            obj = await self._client.resource(kind.plural).get(name)
        except NotFound:
            return None
        return obj if obj.metadata.uid == uid else None

    async def _exists(self, node: Node) -> bool:
        return await self._live(node.kind, node.name, node.uid) is not None

    async def _delete(self, node: Node, *, reason: str) -> None:
        live = await self._live(node.kind, node.name, node.uid)
        if live is None or live.metadata.HasField("deletion_timestamp"):
            return
        try:
            await self._client.resource(node.kind.plural).delete(
                node.name, resource_version=live.metadata.resource_version
            )
        except NotFound:
            return
        self._count("deleted")
        log.info("collected", object=str(node), reason=reason)

    async def _drop_finalizer(self, owner: Node, finalizer: str) -> None:
        live = await self._live(owner.kind, owner.name, owner.uid)
        if live is None or finalizer not in live.metadata.finalizers:
            return
        live.metadata.finalizers.remove(finalizer)
        await self._client.resource(owner.kind.plural).update(live)
        self._count(f"finalized-{finalizer}")
        log.info("owner released", object=str(owner), finalizer=finalizer)

    def _count(self, what: str) -> None:
        self.actions[what] = self.actions.get(what, 0) + 1


__all__ = ["DEFAULT_OWNER_RESYNC", "SKIPPED", "SWEEP", "OwnerCollector"]
