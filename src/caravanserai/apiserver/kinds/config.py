"""Configs: plain configuration data, readable like any other object; a node reads only the Configs that a
project bound to it references (the node authorizer's rule, see `apiserver.auth`)."""

from __future__ import annotations

from typing import Any

from caravanserai import meta
from caravanserai.apiserver import datarules, validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.text.selectors import validate_dns_subdomain

KIND = meta.KINDS["configs"]


class ConfigStrategy(KindStrategy):
    node_reads_referenced = True

    def validate(self, obj: Any) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=datarules.config_spec)

    def validate_status(self, obj: Any) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)


STRATEGY = ConfigStrategy(KIND)

__all__ = ["ConfigStrategy", "STRATEGY"]
