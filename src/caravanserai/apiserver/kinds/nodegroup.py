"""NodeGroups: pools of like nodes that cara-autoscaler grows and shrinks (`caravanserai.controllers.autoscaler`).
Only admin writes a group; `controller:*` identities (the autoscaler) write its status; every authenticated
identity but nodes reads it.

Rules (each violation names its field):

* the name is a DNS label of at most 50 characters: node names are made from it (`<group>-<5 characters>`);
* `spec.minSize` ≥ 0, `spec.maxSize` ≥ 1, and `spec.minSize` ≤ `spec.maxSize`;
* `spec.template`: labels as metadata labels (`caravanserai.io/nodegroup`, if given, must be the group's name),
  taints as a Node's, capacity and allocatable resource lists (names and non-negative quantities), no allocatable
  above its capacity;
* `spec.provider` is exactly one of `exec` (with `create` and `delete` commands, an optional `list`, a duration
  `timeout`, environment names as shell variables) or `grpc` (an `address` HOST:PORT, a duration `timeout`);
* `spec.scaleDown.idleTime` and `spec.registerTimeout` are durations; `spec.scaleDown.utilizationThreshold` is
  in [0, 1];
* status: `desired` and `current` not negative, conditions well formed.
"""

from __future__ import annotations

import re

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.text.addresses import AddressError, parse_address
from caravanserai.text.durations import parse_duration
from caravanserai.text.selectors import validate_dns_label, validate_label_key, validate_label_value
from caravanserai.text.violations import Violations, key_path, quote

KIND = meta.KINDS["nodegroups"]
MAX_NAME = 50
"""A group's name leaves room in a DNS label for the suffix of its nodes' names."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def group_name(name: str) -> str | None:
    """Why `name` cannot name a group, or None."""
    problem = validate_dns_label(name)
    if problem is None and len(name) > MAX_NAME:
        return f"must be at most {MAX_NAME} characters (node names are made from it), not {len(name)}"
    return problem


def duration(errors: Violations, path: str, text: str) -> None:
    """An empty string (the default) or a duration (`90s`, `10m`, `1h30m`) above zero."""
    if not text:
        return
    try:
        value = parse_duration(text)
    except ValueError as exc:
        errors.add(path, str(exc))
        return
    if value <= 0:
        errors.add(path, f"must be longer than zero, not {quote(text)}")


def _template(errors: Violations, template: v1.NodeTemplate) -> None:
    validation.labels(errors, "spec.template.labels", template.labels)
    for i, taint in enumerate(template.taints):
        path = f"spec.template.taints[{i}]"
        if errors.required(f"{path}.key", taint.key):
            errors.check(f"{path}.key", validate_label_key(taint.key), prefix="invalid key: ")
        errors.check(f"{path}.value", validate_label_value(taint.value))
        errors.choice(f"{path}.effect", taint.effect, validation.TAINT_EFFECTS)
    capacity = validation.quantities(errors, "spec.template.capacity", template.capacity)
    allocatable = validation.quantities(errors, "spec.template.allocatable", template.allocatable)
    for name, amount in allocatable.items():
        if name in capacity and amount > capacity[name]:
            errors.add(
                key_path("spec.template.allocatable", name),
                f"must not exceed the capacity ({template.capacity[name]}), not {template.allocatable[name]}",
            )


def _exec(errors: Violations, spec: v1.ExecProvider) -> None:
    errors.required("spec.provider.exec.create", list(spec.create))
    errors.required("spec.provider.exec.delete", list(spec.delete))
    for field in ("create", "delete", "list"):
        if any(not arg for arg in getattr(spec, field)[:1]):
            errors.add(f"spec.provider.exec.{field}[0]", "the program must not be empty")
    duration(errors, "spec.provider.exec.timeout", spec.timeout)
    for name in spec.env:
        if not _ENV_NAME.match(name):
            errors.add(
                key_path("spec.provider.exec.env", name),
                "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
            )


def _provider(errors: Violations, provider: v1.NodeGroupProvider) -> None:
    given = [field.name for field, _ in provider.ListFields()]
    if not given:
        errors.add("spec.provider", "is required: exec (commands) or grpc (a NodeProvider server)")
        return
    if len(given) > 1:
        errors.add("spec.provider", "must name exactly one provider (exec or grpc), not both")
    if provider.HasField("exec"):
        _exec(errors, provider.exec)
    if provider.HasField("grpc"):
        if errors.required("spec.provider.grpc.address", provider.grpc.address):
            try:
                parse_address(provider.grpc.address, port_zero=False)
            except AddressError as exc:
                errors.add("spec.provider.grpc.address", str(exc))
        duration(errors, "spec.provider.grpc.timeout", provider.grpc.timeout)


def group_spec(errors: Violations, spec: v1.NodeGroupSpec) -> None:
    """The rules of `spec` (module docstring), every violation naming its field."""
    errors.non_negative("spec.minSize", spec.min_size)
    if spec.max_size < 1:
        errors.add("spec.maxSize", f"must be at least 1, not {spec.max_size}")
    elif spec.min_size > spec.max_size:
        errors.add("spec.minSize", f"must not exceed spec.maxSize ({spec.max_size}), not {spec.min_size}")
    _template(errors, spec.template)
    _provider(errors, spec.provider)
    duration(errors, "spec.scaleDown.idleTime", spec.scale_down.idle_time)
    duration(errors, "spec.registerTimeout", spec.register_timeout)
    if spec.scale_down.HasField("utilization_threshold"):
        threshold = spec.scale_down.utilization_threshold
        if not 0.0 <= threshold <= 1.0:
            errors.add("spec.scaleDown.utilizationThreshold", f"must be between 0 and 1, not {threshold:g}")


def group_status(errors: Violations, status: v1.NodeGroupStatus) -> None:
    errors.non_negative("status.desired", status.desired)
    errors.non_negative("status.current", status.current)
    validation.conditions(errors, "status.conditions", status.conditions)


def _labelled_as_group(errors: Violations, obj: v1.NodeGroup) -> None:
    value = obj.spec.template.labels.get(v1.LABEL_NODE_GROUP)
    if value is not None and value != obj.metadata.name:
        errors.add(
            key_path("spec.template.labels", v1.LABEL_NODE_GROUP),
            f"must be the group's name ({quote(obj.metadata.name)}) or left out, not {quote(value)}",
        )


class NodeGroupStrategy(KindStrategy[v1.NodeGroup]):
    """Generic behaviour plus the rules above. Writes: admin; status: the autoscaler (`controller:*`)."""

    controller_writes = frozenset({"update_status"})

    def validate(self, obj: v1.NodeGroup) -> None:
        def spec_rule(errors: Violations, spec: v1.NodeGroupSpec) -> None:
            group_spec(errors, spec)
            _labelled_as_group(errors, obj)

        validation.check_object(obj, kind=KIND.kind, name_rule=group_name, spec_rule=spec_rule)

    def validate_status(self, obj: v1.NodeGroup) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=group_status)


STRATEGY = NodeGroupStrategy(KIND)

__all__ = ["KIND", "MAX_NAME", "STRATEGY", "NodeGroupStrategy", "duration", "group_name", "group_spec", "group_status"]
