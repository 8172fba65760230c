"""Leases: heartbeats (one per node, named after it) and leader-election locks. Controllers write them; a node
reaches only its own. Rules: a duration of at least 1 s while held, counts not negative."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.apiserver.kinds.node import own_object_allowed
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations

KIND = meta.KINDS["leases"]


def lease_spec(errors: Violations, spec: v1.LeaseSpec) -> None:
    if spec.lease_duration_seconds < 0 or not spec.holder_identity:
        errors.non_negative("spec.leaseDurationSeconds", spec.lease_duration_seconds)
    elif spec.lease_duration_seconds < 1:
        errors.add(
            "spec.leaseDurationSeconds",
            f"must be at least 1 while holderIdentity is set, not {spec.lease_duration_seconds}",
        )
    errors.non_negative("spec.leaseTransitions", spec.lease_transitions)


class LeaseStrategy(KindStrategy[v1.Lease]):
    controller_writes = frozenset({"create", "update", "delete"})

    def validate(self, obj: v1.Lease) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=lease_spec)

    def validate_status(self, obj: v1.Lease) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)

    def node_allows(
        self, node: str, verb: str, *, name: str, obj: v1.Lease | None, old: v1.Lease | None, field_selector: str
    ) -> bool:
        return own_object_allowed(node, verb, name=name, field_selector=field_selector)


STRATEGY = LeaseStrategy(KIND)

__all__ = ["KIND", "STRATEGY", "LeaseStrategy", "lease_spec"]
