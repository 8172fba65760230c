"""Secrets: confidential data. Admin writes them; controllers read them; a node reads only the Secrets that a
project bound to it references (the node authorizer's rule, see `apiserver.auth`); nobody else reads them."""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.apiserver import datarules, validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.text.selectors import validate_dns_subdomain

KIND = meta.KINDS["secrets"]


class SecretStrategy(KindStrategy):
    node_reads_referenced = True

    def default_new(self, obj: Any, *, now: float) -> None:
        obj.spec.type = obj.spec.type or v1.SECRET_OPAQUE

    def validate(self, obj: Any) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=datarules.secret_spec)

    def validate_status(self, obj: Any) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)


STRATEGY = SecretStrategy(KIND)

__all__ = ["STRATEGY", "SecretStrategy"]
