"""Leases: heartbeats (one per node, named after it) and leader-election locks. Controllers write them; a node
reaches only its own."""

from __future__ import annotations

from typing import Any

from caravanserai import meta
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.apiserver.kinds.node import own_object_allowed
from caravanserai.text.selectors import validate_dns_subdomain

KIND = meta.KINDS["leases"]


class LeaseStrategy(KindStrategy):
    controller_writes = frozenset({"create", "update", "delete"})

    def validate(self, obj: Any) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=validation.lease_spec)

    def validate_status(self, obj: Any) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)

    def node_allows(self, node: str, verb: str, *, name: str, obj: Any, old: Any, field_selector: str) -> bool:
        return own_object_allowed(node, verb, name=name, field_selector=field_selector)


STRATEGY = LeaseStrategy(KIND)

__all__ = ["STRATEGY", "LeaseStrategy"]
