"""Secrets: confidential data. Admin writes them; controllers read them; a node reads only the Secrets that a
project bound to it references (the node authorizer's rule, see `apiserver.auth`); nobody else reads them.

Rules: `type` Opaque (default) or RegistryAuth (keys registry/username/password, or `.dockerconfigjson`; see
`caravanserai.project.registryauth`); data keys are file-name-like (`validation.data_keys`).
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.project import registryauth
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations, key_path

KIND = meta.KINDS["secrets"]


def secret_spec(errors: Violations, spec: v1.SecretSpec) -> None:
    errors.choice("spec.type", spec.type, v1.SECRET_TYPES, empty="for Opaque")
    validation.data_keys(errors, "spec.data", list(spec.data))
    if spec.type == v1.SECRET_REGISTRY_AUTH:
        try:
            registryauth.credentials(spec.data)
        except ValueError as exc:
            key, _, reason = str(exc).partition(": ")
            errors.add(key_path("spec.data", key), reason)


class SecretStrategy(KindStrategy[v1.Secret]):
    node_reads_referenced = True

    def default_new(self, obj: v1.Secret, *, now: float) -> None:
        obj.spec.type = obj.spec.type or v1.SECRET_OPAQUE

    def validate(self, obj: v1.Secret) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=secret_spec)

    def validate_status(self, obj: v1.Secret) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)


STRATEGY = SecretStrategy(KIND)

__all__ = ["KIND", "STRATEGY", "SecretStrategy", "secret_spec"]
