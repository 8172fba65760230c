"""Custom kinds: the strategy of a kind defined by a ResourceDefinition.

* Objects are checked against the definition's descriptors (`validation.schema_rules`): unknown fields, wrong wire
  types and undefined enum numbers are refused with their field path (`spec.replicas`), on top of the common
  metadata rules and size limits.
* Status is a subresource: Create refuses it, Update keeps the stored one, UpdateStatus changes only it;
  generation moves on spec changes only (the base strategy's behaviour).
* Authorization: `admin` and `controller:*` identities read and write objects and their status, other identities
  read, `node:*` identities may use only the verbs listed in the definition's `nodeVerbs`.
"""

from __future__ import annotations

from typing import Any

from caravanserai import v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.customkinds.schemas import Schema, kind_for_definition
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations


class CustomKindStrategy(KindStrategy):
    status_on_create = False
    controller_writes = frozenset({"create", "update", "update_status", "delete"})

    def __init__(self, definition: v1.ResourceDefinition) -> None:
        """Build the kind's classes from `definition` (SchemaError when they do not build)."""
        schema = Schema.compile(definition.spec)
        super().__init__(kind_for_definition(definition, schema.object_cls))
        self.definition = definition
        self.schema = schema
        self._node_verbs = frozenset(definition.spec.node_verbs)

    def validate(self, obj: Any) -> None:
        def spec_rule(errors: Violations, spec: Any) -> None:
            validation.schema_rules(errors, spec, "spec")
            validation.schema_rules(errors, obj.metadata, "metadata")

        validation.check_object(
            obj,
            kind=self.kind.kind,
            name_rule=validate_dns_subdomain,
            spec_rule=spec_rule,
            api_version=self.kind.api_version,
        )

    def validate_status(self, obj: Any) -> None:
        validation.check_status(
            obj, kind=self.kind.kind, status_rule=lambda errors, status: validation.schema_rules(errors, status, "status")
        )

    def node_allows(self, node: str, verb: str, *, name: str, obj: Any, old: Any, field_selector: str) -> bool:
        return verb in self._node_verbs


__all__ = ["CustomKindStrategy"]
