"""The routes reconciler: one project key at a time, make its Route what `routing.route_of` derives.

    reconcile("team-a/shop")
      wanted = route_of(project, nodes)   # from the informers' caches; None: no project, or no ingress
      stored = the Route of that key in the cache
      none wanted, one stored   → delete it
      one wanted, none stored   → create it
      both, and they differ     → update the stored one with the wanted spec and owner references

Guarantees:

* **Idempotent, writes only on change** (`routing.same_spec`): reconciling a key again, or every key after a
  restart (the controller's start lists every project: an existing cluster gets its Routes then), writes nothing
  that is already right.
* **Compare-and-swap**: an update names the version it read; a Conflict, or AlreadyExists for a create the cache
  has not seen yet, raises, and the key is retried with backoff on fresher caches. A delete of a Route already
  gone is done.
* **Only Routes**: the project and the nodes are read, never written.
"""

from __future__ import annotations

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.controller import Result
from caravanserai.errors import NotFound
from caravanserai.informer import CacheReader
from caravanserai.project import routing

log = structlog.get_logger(__name__)


class RouteReconciler:
    """Keeps each project's Route as derived (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        projects: CacheReader[v1.Project],
        nodes: CacheReader[v1.Node],
        routes: CacheReader[v1.Route],
    ) -> None:
        self._client = client.resource(v1.Route)
        self._projects = projects
        self._nodes = nodes
        self._routes = routes
        self.writes = 0  # creates, updates and deletes made (tests and metrics read it)

    def wanted(self, key: str) -> v1.Route | None:
        """The Route the project of `key` should have now, from the caches (None: none)."""
        project = self._projects.get(key)
        return routing.route_of(project, self._nodes.get) if project is not None else None

    async def reconcile(self, key: str) -> Result:
        wanted = self.wanted(key)
        stored = self._routes.get(key)
        if wanted is None:
            if stored is not None:
                await self._delete(key)
            return Result()
        if stored is None:
            await self._client.create(wanted)
            self.writes += 1
            log.info("route created", route=meta.shown(key), node=wanted.spec.node.node)
        elif not routing.same_spec(stored, wanted):
            updated = meta.copy(stored)
            updated.spec.CopyFrom(wanted.spec)
            del updated.metadata.owner_references[:]
            updated.metadata.owner_references.extend(wanted.metadata.owner_references)
            await self._client.update(updated)
            self.writes += 1
            log.debug("route updated", route=meta.shown(key), node=wanted.spec.node.node, phase=wanted.spec.phase)
        return Result()

    async def _delete(self, key: str) -> None:
        try:
            await self._client.delete(key)
        except NotFound:
            return
        self.writes += 1
        log.info("route deleted", route=meta.shown(key))


__all__ = ["RouteReconciler"]
