"""The rules of the places a project names Secrets and Configs, of its image pull settings and of extended
resources (the rules of Secrets and Configs themselves are beside their strategies, `kinds.secret` and
`kinds.config`).

* `env[i].valueFrom` names exactly one of a Secret and a Config and a key, and then `value` is empty;
  `envFrom[i]` names exactly one of a Secret and a Config.
* A volume of type Secret names a Secret (and no Config), of type Config a Config; `mode` only for those, within
  0..0o777. Other volume types name neither. A volume of type HostPath has an absolute `hostPath`; no other type
  has one.
* `imagePullPolicy` is IfNotPresent (default), Always or Never; `imagePullSecrets` are object names, each once.
* Extended resources (any name but cpu and memory) are whole numbers, and a request equals its limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from caravanserai import v1
from caravanserai.apiserver import validation
from caravanserai.project.grants import STANDARD_RESOURCES
from caravanserai.text.quantity import parse_quantity
from caravanserai.text.selectors import validate_reference
from caravanserai.text.violations import Violations, key_path, quote

MAX_MODE = 0o777


def _one_source(errors: Violations, path: str, secret: str, config: str) -> None:
    if bool(secret) == bool(config):
        errors.add(path, "set exactly one of secret and config")
    for field, name in (("secret", secret), ("config", config)):
        if name:
            errors.check(f"{path}.{field}", validate_reference(name))


def service_data(errors: Violations, path: str, service: v1.Service) -> None:
    """env[].valueFrom, envFrom, imagePullPolicy and extended resources of one service."""
    for i, env in enumerate(service.env):
        if not env.HasField("value_from"):
            continue
        here = f"{path}.env[{i}].valueFrom"
        _one_source(errors, here, env.value_from.secret, env.value_from.config)
        if errors.required(f"{here}.key", env.value_from.key):
            validation.data_keys(errors, f"{here}.key", [env.value_from.key])
        if env.value:
            errors.add(f"{path}.env[{i}].value", "must be empty when valueFrom is set")
    for i, source in enumerate(service.env_from):
        _one_source(errors, f"{path}.envFrom[{i}]", source.secret, source.config)
    errors.choice(f"{path}.imagePullPolicy", service.image_pull_policy, v1.PULL_POLICIES, empty="for IfNotPresent")
    extended_resources(errors, f"{path}.resources", service.resources)


def _whole(errors: Violations, path: str, text: str) -> Decimal | None:
    try:
        amount = parse_quantity(text)
    except (ValueError, InvalidOperation):
        return None  # reported by the common quantity rule
    if amount != amount.to_integral_value():
        errors.add(path, f"an extended resource must be a whole number, not {quote(text)}")
        return None
    return amount


def extended_resources(errors: Violations, path: str, resources: v1.ResourceRequirements) -> None:
    """Extended resources are whole numbers and their request equals their limit (Kubernetes' rule)."""
    requests: Mapping[str, str] = resources.requests
    limits: Mapping[str, str] = resources.limits
    for name in sorted((set(requests) | set(limits)) - STANDARD_RESOURCES):
        request = _whole(errors, key_path(f"{path}.requests", name), requests[name]) if name in requests else None
        limit = _whole(errors, key_path(f"{path}.limits", name), limits[name]) if name in limits else None
        if request is not None and limit is not None and request != limit:
            errors.add(
                key_path(f"{path}.requests", name),
                f"must equal the limit for an extended resource: request {requests[name]} != limit {limits[name]}",
            )


def volume_data(errors: Violations, path: str, volume: v1.Volume) -> None:
    """The Secret/Config fields of one project volume, and its host path."""
    if volume.type == v1.VOLUME_HOST_PATH:
        if errors.required(f"{path}.hostPath", volume.host_path):
            validation.absolute_path(errors, f"{path}.hostPath", volume.host_path)
            if ":" in volume.host_path:
                errors.add(f"{path}.hostPath", f"must not contain ':', not {quote(volume.host_path)}")
    elif volume.host_path:
        errors.add(f"{path}.hostPath", "is only for volumes of type HostPath")
    if volume.type == v1.VOLUME_SECRET:
        if errors.required(f"{path}.secret", volume.secret):
            errors.check(f"{path}.secret", validate_reference(volume.secret))
        if volume.config:
            errors.add(f"{path}.config", "must be empty for a volume of type Secret")
    elif volume.type == v1.VOLUME_CONFIG:
        if errors.required(f"{path}.config", volume.config):
            errors.check(f"{path}.config", validate_reference(volume.config))
        if volume.secret:
            errors.add(f"{path}.secret", "must be empty for a volume of type Config")
    else:
        for field, value in (("secret", volume.secret), ("config", volume.config)):
            if value:
                errors.add(f"{path}.{field}", "is only for volumes of type Secret or Config")
        if volume.mode:
            errors.add(f"{path}.mode", "is only for volumes of type Secret or Config")
        return
    if not 0 <= volume.mode <= MAX_MODE:
        errors.add(f"{path}.mode", f"must be a file mode between 0 and 0o777 (511), not {volume.mode}")


def pull_secrets(errors: Violations, spec: v1.ProjectSpec) -> None:
    for i, name in enumerate(spec.image_pull_secrets):
        if errors.required(f"spec.imagePullSecrets[{i}]", name):
            errors.check(f"spec.imagePullSecrets[{i}]", validate_reference(name))
    errors.unique(((f"spec.imagePullSecrets[{i}]", n) for i, n in enumerate(spec.image_pull_secrets)), "secret")


__all__ = ["MAX_MODE", "extended_resources", "pull_secrets", "service_data", "volume_data"]
