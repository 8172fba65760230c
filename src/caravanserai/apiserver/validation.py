"""The generic rule library of server-side validation: what every kind's rules share.

Each kind's strategy (`apiserver.kinds`) owns its own rules and calls into this module:

    validation.check_object(obj, kind="Node", name_rule=validate_dns_subdomain, spec_rule=node_spec)
    validation.check_status(obj, kind="Node", status_rule=node_status)

`check_object` adds the rules every kind shares (type meta, metadata: name, labels, annotations, finalizers, owner
references) and `check_status` the size limits; the helpers below (`labels`, `quantities`, `conditions`,
`data_keys` …) are the building blocks several kinds' rules use. No rule here names a kind.

Guarantees:

* **All at once.** Each call raises at most one `caravanserai.errors.Invalid`, listing every violation found
  (at most `MAX_VIOLATIONS`, then a count of the rest), so a user fixes a manifest in one round.
* **Field paths** are camelCase manifest paths with indexes and quoted map keys: `spec.services[1].name`,
  `metadata.labels["Bad Key"]`, `spec.services[0].resources.requests["cpu"]`.
* **Capped input.** Beyond the rules of each kind, no string may exceed `MAX_STRING_BYTES`, no list
  `MAX_ITEMS` entries, no map `MAX_MAP_ENTRIES` entries; annotations are exempt from the last two and share
  `MAX_ANNOTATIONS_BYTES` instead (room for a last-applied configuration); every timestamp lies within
  years 1-9999.
* **Pure.** Nothing is changed, defaulted or looked up; the same object always gives the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from google.protobuf.message import Message

from caravanserai import v1
from caravanserai.text.quantity import parse_quantity
from caravanserai.text.selectors import validate_dns_label, validate_label_key, validate_label_value
from caravanserai.text.violations import MAX_VIOLATIONS, Violations, key_path, quote

MAX_STRING_BYTES = 64 * 1024
MAX_ITEMS = 1000
MAX_MAP_ENTRIES = 256
MAX_ANNOTATIONS_BYTES = 256 * 1024

_MIN_TIMESTAMP = -62_135_596_800  # 0001-01-01T00:00:00Z
_MAX_TIMESTAMP = 253_402_300_799  # 9999-12-31T23:59:59Z
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
"""The effects of a node's taint, which a project's toleration names too."""
_DATA_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def labels(errors: Violations, path: str, labels: Mapping[str, str]) -> None:
    """Label keys (qualified names) and values of a label map (metadata.labels, a node selector)."""
    for key, value in labels.items():  # the entry's path is only written out for a violation
        bad_key, bad_value = validate_label_key(key), validate_label_value(value)
        if bad_key is not None or bad_value is not None:
            errors.check(key_path(path, key), bad_key, prefix="invalid key: ")
            errors.check(key_path(path, key), bad_value)


def absolute_path(errors: Violations, path: str, value: str) -> None:
    """A file path that must start with '/'."""
    if not value.startswith("/"):
        errors.add(path, f"must be an absolute path (starting with '/'), not {quote(value)}")


# ---- metadata -----------------------------------------------------------------------------------------------


def _metadata(errors: Violations, meta: v1.ObjectMeta, name_rule: Callable[[str], str | None]) -> None:
    if errors.required("metadata.name", meta.name):
        errors.check("metadata.name", name_rule(meta.name))
    if meta.namespace:
        errors.check("metadata.namespace", validate_dns_label(meta.namespace))
    labels(errors, "metadata.labels", meta.labels)
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
    owner_references(errors, meta)


def owner_references(errors: Violations, meta: v1.ObjectMeta) -> None:
    """Each owner reference names a kind, a name and a uid (not the object's own); at most one is the
    controller; no uid twice."""
    seen: set[str] = set()
    controllers = 0
    for i, ref in enumerate(meta.owner_references):
        path = f"metadata.ownerReferences[{i}]"
        errors.required(f"{path}.kind", ref.kind)
        errors.required(f"{path}.name", ref.name)
        if errors.required(f"{path}.uid", ref.uid):
            if ref.uid in seen:
                errors.add(f"{path}.uid", f"{quote(ref.uid)} is referenced twice")
            elif meta.uid and ref.uid == meta.uid:
                errors.add(f"{path}.uid", "an object cannot own itself")
            seen.add(ref.uid)
        if ref.controller:
            controllers += 1
            if controllers > 1:
                errors.add(f"{path}.controller", "only one owner reference may have controller=true")


def _type_meta(errors: Violations, obj: Any, kind: str, api_version: str) -> None:
    if obj.api_version not in ("", api_version):
        errors.add("apiVersion", f"must be {quote(api_version)}, not {quote(obj.api_version)}")
    if obj.kind not in ("", kind):
        errors.add("kind", f"must be {quote(kind)}, not {quote(obj.kind)}")


# ---- quantities, conditions, data keys ----------------------------------------------------------------------


def quantity(errors: Violations, path: str, text: str) -> Decimal | None:
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


def quantities(errors: Violations, path: str, values: Mapping[str, str]) -> dict[str, Decimal]:
    """Check a resource list (names and non-negative quantities); the parsed values of the valid entries."""
    parsed: dict[str, Decimal] = {}
    for name, text in values.items():
        errors.check(key_path(path, name), validate_label_key(name), prefix="invalid resource name: ")
        amount = quantity(errors, key_path(path, name), text)
        if amount is not None:
            parsed[name] = amount
    return parsed


def conditions(errors: Violations, path: str, conditions: Iterable[v1.Condition]) -> None:
    """Each condition has a type (once) and a status True, False or Unknown."""
    conditions = list(conditions)
    for i, condition in enumerate(conditions):
        errors.required(f"{path}[{i}].type", condition.type)
        errors.choice(f"{path}[{i}].status", condition.status, (v1.TRUE, v1.FALSE, v1.UNKNOWN))
    errors.unique(((f"{path}[{i}].type", c.type) for i, c in enumerate(conditions)), "condition type")


def data_keys(errors: Violations, path: str, keys: Iterable[str]) -> None:
    """Keys of Secret and Config data (and the keys that name them): file-name-like, `[-._a-zA-Z0-9]+`, not `.`
    or `..`."""
    for key in keys:
        if not _DATA_KEY.match(key) or key in (".", ".."):
            errors.add(key_path(path, key), "key must consist of letters, digits, '-', '_' or '.' (not '.' or '..')")


# ---- size limits, for every field ---------------------------------------------------------------------------


def _limits(errors: Violations, message: Message, path: str) -> None:
    """Check string sizes, list and map lengths and timestamp ranges of `message` and everything inside it."""
    for field, value in message.ListFields():
        here = f"{path}.{field.json_name}"
        value_field = _map_value_field(field)
        if value_field is not None:
            annotations = here == "metadata.annotations"  # capped by their total size instead
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


# ---- entry points -------------------------------------------------------------------------------------------


SpecRule = Callable[[Violations, Any], None]


def _what(kind: str, obj: Any) -> str:
    return f"{kind.lower()} {quote(obj.metadata.name)}" if obj.metadata.name else kind.lower()


def check_object(
    obj: Any,
    *,
    kind: str,
    name_rule: Callable[[str], str | None],
    spec_rule: SpecRule,
    api_version: str = v1.API_VERSION,
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


__all__ = [
    "MAX_ANNOTATIONS_BYTES",
    "MAX_ITEMS",
    "MAX_MAP_ENTRIES",
    "MAX_STRING_BYTES",
    "MAX_VIOLATIONS",
    "SpecRule",
    "TAINT_EFFECTS",
    "absolute_path",
    "check_object",
    "check_status",
    "conditions",
    "data_keys",
    "labels",
    "no_rules",
    "quantities",
    "quantity",
]
