"""Events: bound to a shared etcd lease so they expire after an hour; anyone with write access creates them, a
node updates only the events it reported (the recorder counts repeats). Rules: an involved object, a type
Normal or Warning, a reason, a count not negative."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations

KIND = meta.KINDS["events"]


def event_spec(errors: Violations, spec: v1.EventSpec) -> None:
    errors.required("spec.involvedObject.kind", spec.involved_object.kind)
    errors.required("spec.involvedObject.name", spec.involved_object.name)
    errors.choice("spec.type", spec.type, ("Normal", "Warning"))
    errors.required("spec.reason", spec.reason)
    errors.non_negative("spec.count", spec.count)


class EventStrategy(KindStrategy[v1.Event]):
    controller_writes = frozenset({"create", "update"})

    recorded_while_terminating = True

    async def create_lease(self, ctx: KindContext) -> int:
        return await ctx.event_leases.current()

    def validate(self, obj: v1.Event) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=event_spec)

    def validate_status(self, obj: v1.Event) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)

    def node_allows(
        self, node: str, verb: str, *, name: str, obj: v1.Event | None, old: v1.Event | None, field_selector: str
    ) -> bool:
        if verb == "update":  # counting repeats of its own events
            return old is not None and obj is not None and old.spec.source.host == node and obj.spec.source.host == node
        return verb == "create"


STRATEGY = EventStrategy(KIND)

__all__ = ["KIND", "STRATEGY", "EventStrategy", "event_spec"]
