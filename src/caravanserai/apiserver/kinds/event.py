"""Events: bound to a shared etcd lease so they expire after an hour; anyone with write access creates them, a
node updates only the events it reported (the recorder counts repeats)."""

from __future__ import annotations

from typing import Any

from caravanserai import meta
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.text.selectors import validate_dns_subdomain

KIND = meta.KINDS["events"]


class EventStrategy(KindStrategy):
    controller_writes = frozenset({"create", "update"})

    async def create_lease(self, ctx: KindContext) -> int:
        return await ctx.event_leases.current()

    def validate(self, obj: Any) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=validation.event_spec)

    def validate_status(self, obj: Any) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)

    def node_allows(self, node: str, verb: str, *, name: str, obj: Any, old: Any, field_selector: str) -> bool:
        if verb == "update":  # counting repeats of its own events
            return old is not None and old.spec.source.host == node and obj.spec.source.host == node
        return verb == "create"


STRATEGY = EventStrategy(KIND)

__all__ = ["EventStrategy", "STRATEGY"]
