"""Running the AdmissionPolicies' hooks on Create and Update of the kinds they name.

The policies are read from this apiserver's `admissionpolicies` watch cache (fed by its one etcd watch of the
kind), never from etcd per write: every apiserver and every `--workers` process follows a policy's write within
the watch's latency (milliseconds; well within a second). A write waits until the cache has its first listing, so
no write made after an apiserver starts skips a stored policy.

Order on each Create and Update (`ResourceService`): defaults; the kind's own mutating hooks (custom kinds:
`spec.admissionHooks`); the policies' mutating hooks, policies in name order, hooks in their order; validation;
the kind's own validating hooks; the policies' validating hooks, in the same order. Calls, replies, timeouts and
failure policies are those of `kindrules.admission.Hooks` (this module only picks the hooks).
"""

from __future__ import annotations

from typing import Any

from caravanserai.apiserver.kindrules import admission
from caravanserai.apiserver.kinds.admissionpolicy import KIND
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.apiserver.watchcache import WatchCache

RESOURCE = KIND.plural


class Policies:
    """The stored AdmissionPolicies of one apiserver (`cache`: its admissionpolicies watch cache, None: none)."""

    def __init__(self, cache: WatchCache | None) -> None:
        self._cache = cache

    async def _hooks(self, strategy: KindStrategy[Any]) -> list[admission.Hooks]:
        """The policies naming `strategy`'s resource, in name order, as `Hooks` of that kind."""
        if self._cache is None or strategy.plural == RESOURCE:
            return []
        await self._cache.ready.wait()
        return [
            admission.Hooks(policy.spec.hooks, kind=strategy.kind)
            for _, policy in sorted(self._cache.objects.items())
            if strategy.plural in policy.spec.resources
        ]

    async def mutate(self, strategy: KindStrategy[Any], obj: Any, old: Any | None) -> Any:
        """`obj` as the policies' mutating hooks change it; on update, generation moves on when they changed the
        spec of an object whose spec the client did not change."""
        mutated = obj
        for hooks in await self._hooks(strategy):
            if hooks.mutating:
                mutated = await hooks.mutate(mutated, old)
        if mutated is not obj and old is not None and mutated.spec != old.spec:
            mutated.metadata.generation = max(mutated.metadata.generation, old.metadata.generation + 1)
        return mutated

    async def validate(self, strategy: KindStrategy[Any], obj: Any, old: Any | None) -> None:
        """Return when every policy's validating hooks allow the write; Invalid naming the hook's field otherwise."""
        for hooks in await self._hooks(strategy):
            await hooks.validate(obj, old)


__all__ = ["RESOURCE", "Policies"]
