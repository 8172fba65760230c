"""Configs: plain configuration data, readable like any other object; a node reads only the Configs that a
project bound to it references (the node authorizer's rule, see `apiserver.auth`). Rules: data keys are
file-name-like (`validation.data_keys`)."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations

KIND = meta.KINDS["configs"]


def config_spec(errors: Violations, spec: v1.ConfigSpec) -> None:
    validation.data_keys(errors, "spec.data", list(spec.data))


class ConfigStrategy(KindStrategy[v1.Config]):
    node_reads_referenced = True

    def validate(self, obj: v1.Config) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=config_spec)

    def validate_status(self, obj: v1.Config) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)


STRATEGY = ConfigStrategy(KIND)

__all__ = ["KIND", "STRATEGY", "ConfigStrategy", "config_spec"]
