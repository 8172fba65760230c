"""Server-side validation of every object the API accepts.

    validate_object("projects", project)   # Create and Update: type meta, metadata and spec
    validate_status("projects", project)   # UpdateStatus: status

Guarantees:

* **All at once.** Each call raises at most one `caravanserai.errors.Invalid`, listing every violation found
  (at most `MAX_VIOLATIONS`, then a count of the rest), so a user fixes a manifest in one round.
* **Field paths** are camelCase manifest paths with indexes and quoted map keys: `spec.services[1].name`,
  `metadata.labels["Bad Key"]`, `spec.services[0].resources.requests["cpu"]`.
* **Bounded input.** Beyond the rules of each kind, no string may exceed `MAX_STRING_BYTES`, no list
  `MAX_ITEMS` entries, no map `MAX_MAP_ENTRIES` entries; annotations are exempt from the last two and share
  `MAX_ANNOTATIONS_BYTES` instead (room for a last-applied configuration); every timestamp lies within
  years 1-9999.
* **Pure.** Nothing is changed, defaulted or looked up; the same object always gives the same answer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from caravanserai import v1
from caravanserai.apiserver import datarules, servicerules
from caravanserai.errors import FieldViolation, Invalid
from caravanserai.text.quantity import parse_quantity
from caravanserai.text.selectors import (
    validate_dns_label,
    validate_dns_subdomain,
    validate_label_key,
    validate_label_value,
)
from caravanserai.text.violations import MAX_VIOLATIONS, Violations, key_path, quote

MAX_STRING_BYTES = 64 * 1024
MAX_ITEMS = 1000
MAX_MAP_ENTRIES = 256
MAX_ANNOTATIONS_BYTES = 256 * 1024

_MIN_TIMESTAMP = -62_135_596_800  # 0001-01-01T00:00:00Z
_MAX_TIMESTAMP = 253_402_300_799  # 9999-12-31T23:59:59Z
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _labels(errors: Violations, path: str, labels: Mapping[str, str]) -> None:
    for key, value in labels.items():  # the entry's path is only written out for a violation
        bad_key, bad_value = validate_label_key(key), validate_label_value(value)
        if bad_key is not None or bad_value is not None:
            errors.check(key_path(path, key), bad_key, prefix="invalid key: ")
            errors.check(key_path(path, key), bad_value)


def _absolute(errors: Violations, path: str, value: str) -> None:
    if not value.startswith("/"):
        errors.add(path, f"must be an absolute path (starting with '/'), not {quote(value)}")


# ---- metadata -----------------------------------------------------------------------------------------------


def _metadata(errors: Violations, meta: v1.ObjectMeta, name_rule: Callable[[str], str | None]) -> None:
    if errors.required("metadata.name", meta.name):
        errors.check("metadata.name", name_rule(meta.name))
    _labels(errors, "metadata.labels", meta.labels)
    size = 0
    for key, value in meta.annotations.items():
        bad_key = validate_label_key(key)
        if bad_key is not None:
            errors.check(key_path("metadata.annotations", key), bad_key, prefix="invalid key: ")
        size += len(key.encode()) + len(value.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        errors.add("metadata.annotations", f"must total at most {MAX_ANNOTATIONS_BYTES} bytes (256 KiB), not {size}")
    for i, finalizer in enumerate(meta.finalizers):
        errors.check(f"metadata.finalizers[{i}]", validate_label_key(finalizer), prefix="must be a qualified name: ")


def _type_meta(errors: Violations, obj: Any, kind: str, api_version: str) -> None:
    if obj.api_version not in ("", api_version):
        errors.add("apiVersion", f"must be {quote(api_version)}, not {quote(obj.api_version)}")
    if obj.kind not in ("", kind):
        errors.add("kind", f"must be {quote(kind)}, not {quote(obj.kind)}")


# ---- projects -----------------------------------------------------------------------------------------------


def project_spec(errors: Violations, spec: v1.ProjectSpec) -> None:
    if not spec.services:
        errors.add("spec.services", "at least one service is required")
    volumes = {volume.name for volume in spec.volumes}
    for i, volume in enumerate(spec.volumes):
        if errors.required(f"spec.volumes[{i}].name", volume.name):
            errors.check(f"spec.volumes[{i}].name", validate_dns_label(volume.name))
        errors.choice(f"spec.volumes[{i}].type", volume.type, v1.VOLUME_TYPES, empty="for Ephemeral")
        datarules.volume_data(errors, f"spec.volumes[{i}]", volume)
    errors.unique(((f"spec.volumes[{i}].name", v.name) for i, v in enumerate(spec.volumes)), "volume name")
    for i, service in enumerate(spec.services):
        _service(errors, f"spec.services[{i}]", service, volumes)
    errors.unique(((f"spec.services[{i}].name", s.name) for i, s in enumerate(spec.services)), "service name")
    errors.unique(
        (
            (f"spec.services[{i}].ports[{j}].hostPort", f"{port.host_port}/{port.protocol or 'TCP'}")
            for i, service in enumerate(spec.services)
            for j, port in enumerate(service.ports)
            if port.host_port
        ),
        "host port",
    )
    services = {service.name for service in spec.services}
    for i, ingress in enumerate(spec.ingress):
        _ingress(errors, f"spec.ingress[{i}]", ingress, services)
    errors.unique(((f"spec.ingress[{i}].name", g.name) for i, g in enumerate(spec.ingress)), "ingress name")
    _labels(errors, "spec.nodeSelector", spec.node_selector)
    for i, toleration in enumerate(spec.tolerations):
        _toleration(errors, f"spec.tolerations[{i}]", toleration)
        servicerules.toleration_seconds(errors, f"spec.tolerations[{i}]", toleration)
    servicerules.dependencies(errors, spec)
    datarules.pull_secrets(errors, spec)


def _service(errors: Violations, path: str, service: v1.Service, volumes: set[str]) -> None:
    if errors.required(f"{path}.name", service.name):
        errors.check(f"{path}.name", validate_dns_label(service.name))
    if errors.required(f"{path}.image", service.image) and any(c.isspace() for c in service.image):
        errors.add(f"{path}.image", f"must not contain whitespace, not {quote(service.image)}")
    for i, env in enumerate(service.env):
        if errors.required(f"{path}.env[{i}].name", env.name) and "=" in env.name:
            errors.add(f"{path}.env[{i}].name", f"must not contain '=', not {quote(env.name)}")
    errors.unique(((f"{path}.env[{i}].name", e.name) for i, e in enumerate(service.env)), "environment variable")
    for i, port in enumerate(service.ports):
        _port(errors, f"{path}.ports[{i}]", port)
    errors.unique(((f"{path}.ports[{i}].name", p.name) for i, p in enumerate(service.ports)), "port name")
    for i, mount in enumerate(service.volume_mounts):
        here = f"{path}.volumeMounts[{i}]"
        if errors.required(f"{here}.name", mount.name) and mount.name not in volumes:
            errors.add(f"{here}.name", f"volume {quote(mount.name)} is not declared in spec.volumes")
        if errors.required(f"{here}.mountPath", mount.mount_path):
            _absolute(errors, f"{here}.mountPath", mount.mount_path)
    mounts = ((f"{path}.volumeMounts[{i}].mountPath", m.mount_path) for i, m in enumerate(service.volume_mounts))
    errors.unique(mounts, "mount path")
    _resources(errors, f"{path}.resources", service.resources)
    errors.choice(f"{path}.restartPolicy", service.restart_policy, ("Always", "OnFailure", "Never"), empty="for Always")
    if service.working_dir:
        _absolute(errors, f"{path}.workingDir", service.working_dir)
    if service.HasField("healthcheck"):
        servicerules.healthcheck(errors, f"{path}.healthcheck", service.healthcheck)
    datarules.service_data(errors, path, service)


def _port(errors: Violations, path: str, port: v1.ServicePort) -> None:
    errors.between(f"{path}.containerPort", port.container_port, 1, 65535)
    errors.between(f"{path}.hostPort", port.host_port, 0, 65535)
    errors.choice(f"{path}.protocol", port.protocol, ("TCP", "UDP"), empty="for TCP")
    if port.host_ip:
        try:
            ipaddress.ip_address(port.host_ip)
        except ValueError:
            errors.add(f"{path}.hostIp", f"must be an IPv4 or IPv6 address, not {quote(port.host_ip)}")
    if port.name:
        errors.check(f"{path}.name", validate_dns_label(port.name))


def _quantity(errors: Violations, path: str, text: str) -> Decimal | None:
    """The value of a non-negative quantity, or None after recording why `text` is not one."""
    try:
        amount = parse_quantity(text)
    except ValueError as exc:
        errors.add(path, str(exc))
        return None
    if amount < 0:
        errors.add(path, f"must not be negative, not {quote(text)}")
        return None
    return amount


def _quantities(errors: Violations, path: str, values: Mapping[str, str]) -> dict[str, Decimal]:
    """Check a resource list (names and non-negative quantities); the parsed values of the valid entries."""
    parsed: dict[str, Decimal] = {}
    for name, text in values.items():
        errors.check(key_path(path, name), validate_label_key(name), prefix="invalid resource name: ")
        amount = _quantity(errors, key_path(path, name), text)
        if amount is not None:
            parsed[name] = amount
    return parsed


def _resources(errors: Violations, path: str, resources: v1.ResourceRequirements) -> None:
    requests = _quantities(errors, f"{path}.requests", resources.requests)
    limits = _quantities(errors, f"{path}.limits", resources.limits)
    for name, limit in limits.items():
        if name in requests and limit < requests[name]:
            errors.add(
                key_path(f"{path}.limits", name),
                f"must not be below the request: limit {resources.limits[name]} < request {resources.requests[name]}",
            )


def _ingress(errors: Violations, path: str, ingress: v1.Ingress, services: set[str]) -> None:
    errors.required(f"{path}.name", ingress.name)
    if ingress.host:
        errors.check(f"{path}.host", validate_dns_subdomain(ingress.host))
    target = ingress.target
    if errors.required(f"{path}.target.service", target.service) and target.service not in services:
        errors.add(f"{path}.target.service", f"service {quote(target.service)} is not declared in spec.services")
    errors.between(f"{path}.target.port", target.port, 1, 65535)
    errors.choice(f"{path}.access.scope", ingress.access.scope, ("Internal", "Public"), empty="for Internal")


def _toleration(errors: Violations, path: str, toleration: v1.Toleration) -> None:
    errors.choice(f"{path}.operator", toleration.operator, ("Equal", "Exists"), empty="for Equal")
    if toleration.key:
        errors.check(f"{path}.key", validate_label_key(toleration.key), prefix="invalid key: ")
    elif toleration.operator != "Exists":
        errors.add(f"{path}.key", "is required unless operator is \"Exists\"")
    if toleration.operator == "Exists" and toleration.value:
        errors.add(f"{path}.value", "must be empty when operator is \"Exists\"")
    errors.check(f"{path}.value", validate_label_value(toleration.value))
    errors.choice(f"{path}.effect", toleration.effect, _TAINT_EFFECTS, empty="for every effect")


def project_status(errors: Violations, status: v1.ProjectStatus) -> None:
    errors.choice("status.phase", status.phase, v1.PHASES)
    if status.node_ref:
        errors.check("status.nodeRef", validate_dns_subdomain(status.node_ref))
    _conditions(errors, "status.conditions", status.conditions)
    for i, service in enumerate(status.services):
        errors.required(f"status.services[{i}].name", service.name)
        errors.non_negative(f"status.services[{i}].restartCount", service.restart_count)
    errors.unique(((f"status.services[{i}].name", s.name) for i, s in enumerate(status.services)), "service name")
    errors.non_negative("status.observedGeneration", status.observed_generation)


def _conditions(errors: Violations, path: str, conditions: Iterable[v1.Condition]) -> None:
    conditions = list(conditions)
    for i, condition in enumerate(conditions):
        errors.required(f"{path}[{i}].type", condition.type)
        errors.choice(f"{path}[{i}].status", condition.status, (v1.TRUE, v1.FALSE, v1.UNKNOWN))
    errors.unique(((f"{path}[{i}].type", c.type) for i, c in enumerate(conditions)), "condition type")


# ---- nodes, leases, events ----------------------------------------------------------------------------------


def node_spec(errors: Violations, spec: v1.NodeSpec) -> None:
    for i, taint in enumerate(spec.taints):
        if errors.required(f"spec.taints[{i}].key", taint.key):
            errors.check(f"spec.taints[{i}].key", validate_label_key(taint.key), prefix="invalid key: ")
        errors.check(f"spec.taints[{i}].value", validate_label_value(taint.value))
        errors.choice(f"spec.taints[{i}].effect", taint.effect, _TAINT_EFFECTS)
    errors.unique(((f"spec.taints[{i}]", f"{t.key}:{t.effect}") for i, t in enumerate(spec.taints)), "taint")


def node_status(errors: Violations, status: v1.NodeStatus) -> None:
    errors.choice("status.state", status.state, v1.NODE_STATES, empty="while unknown")
    _conditions(errors, "status.conditions", status.conditions)
    _quantities(errors, "status.capacity", status.capacity)
    _quantities(errors, "status.allocatable", status.allocatable)
    for i, address in enumerate(status.network.addresses):
        errors.choice(f"status.network.addresses[{i}].type", address.type, ("InternalIP", "ExternalIP", "Hostname"))
        errors.required(f"status.network.addresses[{i}].address", address.address)
    errors.between("status.network.agentPort", status.network.agent_port, 0, 65535)
    for name, text in (("download", status.network.throughput.download), ("upload", status.network.throughput.upload)):
        if text:
            _quantity(errors, f"status.network.throughput.{name}", text)


def lease_spec(errors: Violations, spec: v1.LeaseSpec) -> None:
    if spec.lease_duration_seconds < 0 or not spec.holder_identity:
        errors.non_negative("spec.leaseDurationSeconds", spec.lease_duration_seconds)
    elif spec.lease_duration_seconds < 1:
        errors.add("spec.leaseDurationSeconds", f"must be at least 1 while holderIdentity is set, not "
                                                f"{spec.lease_duration_seconds}")
    errors.non_negative("spec.leaseTransitions", spec.lease_transitions)


def event_spec(errors: Violations, spec: v1.EventSpec) -> None:
    errors.required("spec.involvedObject.kind", spec.involved_object.kind)
    errors.required("spec.involvedObject.name", spec.involved_object.name)
    errors.choice("spec.type", spec.type, ("Normal", "Warning"))
    errors.required("spec.reason", spec.reason)
    errors.non_negative("spec.count", spec.count)


# ---- size limits, for every field ---------------------------------------------------------------------------


def _limits(errors: Violations, message: Message, path: str) -> None:
    """Check string sizes, list and map lengths and timestamp ranges of `message` and everything inside it."""
    for field, value in message.ListFields():
        here = f"{path}.{field.json_name}"
        value_field = _map_value_field(field)
        if value_field is not None:
            annotations = here == "metadata.annotations"  # bounded by their total size instead
            if len(value) > MAX_MAP_ENTRIES and not annotations:
                errors.add(here, f"must have at most {MAX_MAP_ENTRIES} entries, not {len(value)}")
            for key, item in value.items():
                key = str(key)
                if _may_exceed(key) or not (annotations or (isinstance(item, str) and not _may_exceed(item))):
                    _limit_string(errors, key_path(here, key), key, what="key")  # the path only when needed
                    if not annotations:
                        _limit_value(errors, key_path(here, key), value_field, item)
        elif field.is_repeated:
            if len(value) > MAX_ITEMS:
                errors.add(here, f"must have at most {MAX_ITEMS} entries, not {len(value)}")
            for i, item in enumerate(value):
                _limit_value(errors, f"{here}[{i}]", field, item)
        else:
            _limit_value(errors, here, field, value)


def _limit_value(errors: Violations, path: str, field: Any, value: Any) -> None:
    if isinstance(value, str):
        _limit_string(errors, path, value, what="value")
    elif field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp":
        if not (_MIN_TIMESTAMP <= value.seconds <= _MAX_TIMESTAMP and 0 <= value.nanos <= 999_999_999):
            errors.add(path, "must be a valid time between years 1 and 9999")
    elif isinstance(value, Message):
        _limits(errors, value, path)


_NOT_A_MAP = object()
_MAP_VALUE_FIELDS: dict[Any, Any] = {}  # field descriptor → its map's value field, or _NOT_A_MAP


def _map_value_field(field: Any) -> Any:
    """The value field of a map `field`, None when `field` is no map (looked up once per field descriptor)."""
    found = _MAP_VALUE_FIELDS.get(field)
    if found is None:
        entry = field.message_type
        is_map = entry is not None and entry.GetOptions().map_entry
        found = _MAP_VALUE_FIELDS[field] = entry.fields_by_name["value"] if is_map else _NOT_A_MAP
    return None if found is _NOT_A_MAP else found


def _may_exceed(value: str) -> bool:
    """Whether `value` may be over MAX_STRING_BYTES (a string of at most a quarter as many characters is not)."""
    return len(value) > MAX_STRING_BYTES // 4


def _limit_string(errors: Violations, path: str, value: str, *, what: str) -> None:
    if _may_exceed(value) and (size := len(value.encode())) > MAX_STRING_BYTES:
        errors.add(path, f"{what} must be at most {MAX_STRING_BYTES} bytes (64 KiB), not {size}")


# ---- custom kinds: what the descriptor says -------------------------------------------------------------------


def schema_rules(errors: Violations, message: Message, path: str) -> None:
    """Check `message` (of a custom kind) against its descriptor: fields the descriptor does not know, fields sent
    with the wrong wire type (both arrive as unknown fields) and enum numbers the enum does not define."""
    unknowns: Any = UnknownFieldSet(message)  # iterable at run time; the stubs do not say so
    for unknown in unknowns:
        known = message.DESCRIPTOR.fields_by_number.get(unknown.field_number)
        if known is not None:
            errors.add(f"{path}.{known.json_name}", f"has the wrong type (wire type {unknown.wire_type}); expected {_type_of(known)}")
        else:
            errors.add(path, f"unknown field number {unknown.field_number}")
    for field, value in message.ListFields():
        here = f"{path}.{field.json_name}"
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key in value:
                _schema_value(errors, key_path(here, str(key)), value_field, value[key])
        elif field.is_repeated:
            for i, item in enumerate(value):
                _schema_value(errors, f"{here}[{i}]", field, item)
        else:
            _schema_value(errors, here, field, value)


def _schema_value(errors: Violations, path: str, field: Any, value: Any) -> None:
    if field.message_type is not None:
        schema_rules(errors, value, path)
    elif field.enum_type is not None and value not in field.enum_type.values_by_number:
        names = ", ".join(v.name for v in field.enum_type.values)
        errors.add(path, f"{value} is not a value of {field.enum_type.name} ({names})")


def _type_of(field: Any) -> str:
    if field.message_type is not None:
        return str(field.message_type.full_name)
    if field.enum_type is not None:
        return str(field.enum_type.full_name)
    names = {v: k.removeprefix("TYPE_").lower() for k, v in vars(type(field)).items() if k.startswith("TYPE_")}
    return str(names.get(field.type, field.type))


# ---- entry points -------------------------------------------------------------------------------------------


SpecRule = Callable[[Violations, Any], None]


def _what(kind: str, obj: Any) -> str:
    return f"{kind.lower()} {quote(obj.metadata.name)}" if obj.metadata.name else kind.lower()


def check_object(
    obj: Any, *, kind: str, name_rule: Callable[[str], str | None], spec_rule: SpecRule, api_version: str = v1.API_VERSION
) -> None:
    """Check type meta, metadata and spec of an object of `kind` for Create or Update (status is not looked at):
    the common rules plus `name_rule` for metadata.name and `spec_rule` for the spec. Raises `Invalid` listing
    every violation. Kind strategies call this with their own rules."""
    errors = Violations()
    _type_meta(errors, obj, kind, api_version)
    _metadata(errors, obj.metadata, name_rule)
    spec_rule(errors, obj.spec)
    _limits(errors, obj.metadata, "metadata")
    _limits(errors, obj.spec, "spec")
    errors.raise_if_any(what=_what(kind, obj))


def check_status(obj: Any, *, kind: str, status_rule: SpecRule) -> None:
    """Check the status of an object of `kind` for UpdateStatus (metadata and spec are not looked at): `status_rule`
    plus the size limits. Raises `Invalid` listing every violation."""
    errors = Violations()
    status_rule(errors, obj.status)
    _limits(errors, obj.status, "status")
    errors.raise_if_any(what=_what(kind, obj))


def no_rules(errors: Violations, part: Any) -> None:
    """The rule of a part without rules of its own (only the common size limits apply)."""


def _builtin(resource: str, obj: Message) -> Any:
    from caravanserai.apiserver.kinds import builtin_kinds  # the kinds import this module's rules

    strategy = builtin_kinds().get(resource)
    if strategy is None:
        known = ", ".join(builtin_kinds().plurals())
        raise Invalid.of([FieldViolation("resource", f"unknown resource {quote(resource)}; known: {known}")])
    if not isinstance(obj, strategy.kind.cls):
        raise TypeError(f"{resource} holds {strategy.kind.cls.__name__} objects, not {type(obj).__name__}")
    return strategy


def validate_object(resource: str, obj: Message) -> None:
    """Check type meta, metadata and spec of a built-in kind's object for Create or Update, as its strategy does.

    `resource` is the plural ("projects", "nodes", "leases", "events"). Raises `Invalid` listing every violation.
    """
    _builtin(resource, obj).validate(obj)


def validate_status(resource: str, obj: Message) -> None:
    """Check the status of a built-in kind's object for UpdateStatus, as its strategy does (metadata and spec are
    not looked at). Raises `Invalid` listing every violation."""
    _builtin(resource, obj).validate_status(obj)


__all__ = [
    "MAX_ANNOTATIONS_BYTES",
    "MAX_ITEMS",
    "MAX_MAP_ENTRIES",
    "MAX_STRING_BYTES",
    "MAX_VIOLATIONS",
    "SpecRule",
    "check_object",
    "check_status",
    "event_spec",
    "lease_spec",
    "no_rules",
    "node_spec",
    "node_status",
    "project_spec",
    "project_status",
    "schema_rules",
    "validate_object",
    "validate_status",
]
