"""Label and field selectors (Kubernetes syntax), and the name rules labels are made of.

    LabelSelector.parse("tier=web, env in (prod,staging), !canary").matches(labels)
    FieldSelector.parse("status.phase=Pending,status.nodeRef!=n1").matches(object_fields(project))

Guarantees:

* **AND.** Comma-separated requirements must all hold; the empty selector matches everything.
* **Kubernetes semantics.** `a=b` and `a in (…)` need the key present; `a!=b` and `a notin (…)` also match
  objects without the key; `a` tests presence and `!a` absence.
* **Round trip.** `X.parse(str(s)) == s`; `str()` writes the canonical form (`a=b`, `a in (x,y)`, no spaces).
* **Clear refusals.** A bad selector raises `caravanserai.errors.Invalid` with one violation at the field path
  `labelSelector` or `fieldSelector`, saying what was expected and where.
* The `validate_*` helpers return `None` for a valid input, otherwise the reason as text, so callers can
  attach their own field path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from google.protobuf.message import Message

from caravanserai.errors import FieldViolation, Invalid

DNS_LABEL_MESSAGE = (
    "must be a lowercase DNS label (a-z, 0-9, '-'), at most 63 characters, starting and ending with a letter or digit"
)
DNS_SUBDOMAIN_MESSAGE = (
    "must be a lowercase DNS subdomain (a-z, 0-9, '-', '.'), at most 253 characters, "
    "each dot-separated part at most 63 characters, starting and ending with a letter or digit"
)
_NAME_RULE = "1-63 characters of A-Z, a-z, 0-9, '-', '_' and '.', starting and ending with a letter or digit"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)


def _short(text: str) -> str:
    """`text` quoted for a message, cut after 64 characters."""
    return repr(text if len(text) <= 64 else text[:64] + "…")


def validate_dns_label(name: str) -> str | None:
    """None when `name` is a DNS-1123 label (lowercase alphanumerics and '-', at most 63), else the reason."""
    if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        return DNS_LABEL_MESSAGE
    return None


def validate_dns_subdomain(name: str) -> str | None:
    """None when `name` is a DNS-1123 subdomain (dot-separated DNS labels, at most 253 in all), else the reason."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name) or any(len(part) > 63 for part in name.split(".")):
        return DNS_SUBDOMAIN_MESSAGE
    return None


def validate_reference(name: str) -> str | None:
    """None when `name` may name another object from a namespaced one (a DNS-1123 subdomain, looked up in the
    referring object's own namespace), else the reason; a "namespace/name" is told it cannot cross namespaces."""
    if "/" in name:
        namespace = name.partition("/")[0]
        return (
            f"{_short(name)} names namespace {_short(namespace)}: a reference names an object in the referring "
            "object's own namespace (references cannot cross namespaces)"
        )
    return validate_dns_subdomain(name)


def validate_label_key(key: str) -> str | None:
    """None when `key` is a qualified name (`[prefix/]name`), else the reason.

    The optional prefix is a DNS subdomain (at most 253 characters); the name has 1-63 characters of
    [A-Za-z0-9._-] and starts and ends with a letter or digit. Annotation keys, finalizers and resource names
    (`cpu`, `example.com/gpu`) follow the same rule.
    """
    if not key:
        return "must not be empty"
    prefix, slash, name = key.rpartition("/")
    if slash:
        if "/" in prefix:
            return "must contain at most one '/' (an optional DNS-subdomain prefix, then the name)"
        if validate_dns_subdomain(prefix) is not None:
            return f"prefix {_short(prefix)} {DNS_SUBDOMAIN_MESSAGE}"
    if len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return f"name part {_short(name)} must be {_NAME_RULE}"
    return None


def validate_label_value(value: str) -> str | None:
    """None when `value` is a valid label value (empty, or the name rule of `validate_label_key`), else the reason."""
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        return f"label value {_short(value)} must be empty or {_NAME_RULE}"
    return None


# ---- label selectors ----------------------------------------------------------------------------------------

LabelOperator = Literal["=", "!=", "in", "notin", "exists", "notexists"]

_TOKEN = re.compile(r"\s*(?:(?P<op>!=|==|=|!|\(|\)|,)|(?P<word>[^\s!=(),]+))")


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One condition on a label: `key operator values` (`exists` and `notexists` take no value)."""

    key: str
    operator: LabelOperator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether `labels` satisfy this requirement (missing keys satisfy only `!=`, `notin` and `notexists`)."""
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "notexists":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "notexists":
            return f"!{self.key}"
        if self.operator in ("in", "notin"):
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        return f"{self.key}{self.operator}{self.values[0]}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of label requirements; no requirements selects everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, joined by commas.

        Raises `Invalid` (field `labelSelector`) on a syntax error or an invalid key or value.
        """
        return _LabelParser(text).parse()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every requirement holds for `labels`."""
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True when the selector has no requirements (and so matches everything)."""
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


class _LabelParser:
    """Recursive-descent parser over the tokens of a label selector."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind "op"|"word", text, position)
        position = 0
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None:  # only trailing whitespace is left
                break
            kind = "op" if match["op"] else "word"
            self.tokens.append((kind, match[kind], match.start(kind)))
            position = match.end()
        self.index = 0

    def error(self, description: str) -> Invalid:
        violation = FieldViolation("labelSelector", f"{description} in selector {_short(self.text)}")
        return Invalid.of([violation], what="label selector")

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> tuple[str, str, int]:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of selector")
        self.index += 1
        return token

    def parse(self) -> LabelSelector:
        requirements: list[LabelRequirement] = []
        while self.peek() is not None:
            requirements.append(self.requirement())
            token = self.peek()
            if token is not None:
                if token[1] != ",":
                    raise self.error(f"expected ',' at position {token[2]}, found {_short(token[1])}")
                self.take()
                if self.peek() is None:
                    raise self.error("expected a requirement after the trailing ','")
        return LabelSelector(tuple(requirements))

    def requirement(self) -> LabelRequirement:
        kind, text, position = self.take()
        if text == "!":
            return LabelRequirement(self.key(), "notexists")
        if kind != "word":
            raise self.error(f"expected a label key at position {position}, found {_short(text)}")
        key = self.checked_key(text)
        token = self.peek()
        if token is None or token[1] == ",":
            return LabelRequirement(key, "exists")
        self.take()
        if token[1] in ("=", "==", "!="):
            return LabelRequirement(key, "!=" if token[1] == "!=" else "=", (self.value(),))
        if token[1] in ("in", "notin"):
            operator: LabelOperator = "in" if token[1] == "in" else "notin"
            return LabelRequirement(key, operator, self.value_set())
        raise self.error(
            f"expected '=', '==', '!=', 'in' or 'notin' after key {_short(key)} at position {token[2]}, "
            f"found {_short(token[1])}"
        )

    def key(self) -> str:
        kind, text, position = self.take()
        if kind != "word":
            raise self.error(f"expected a label key at position {position}, found {_short(text)}")
        return self.checked_key(text)

    def checked_key(self, key: str) -> str:
        reason = validate_label_key(key)
        if reason is not None:
            raise self.error(f"invalid label key {_short(key)}: {reason}")
        return key

    def value(self) -> str:
        token = self.peek()
        if token is None or token[0] != "word":  # `a=` compares with the empty value
            return ""
        self.take()
        reason = validate_label_value(token[1])
        if reason is not None:
            raise self.error(reason)
        return token[1]

    def value_set(self) -> tuple[str, ...]:
        _kind, text, position = self.take()
        if text != "(":
            raise self.error(f"expected '(' at position {position}, found {_short(text)}")
        values = [self.value()]
        while (token := self.take())[1] == ",":
            values.append(self.value())
        if token[1] != ")":
            raise self.error(f"expected ',' or ')' at position {token[2]}, found {_short(token[1])}")
        if values == [""]:
            raise self.error("the value set of 'in' and 'notin' must not be empty")
        return tuple(values)


# ---- field selectors ----------------------------------------------------------------------------------------

FIELDS_OF_KIND: dict[str, tuple[str, ...]] = {
    "Project": ("metadata.name", "metadata.namespace", "status.nodeRef", "status.phase"),
    "Event": (
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.namespace",
        "involvedObject.uid",
        "metadata.name",
        "metadata.namespace",
        "reason",
        "type",
    ),
}
"""The fields a field selector may name, per kind; a kind not listed has `metadata.name` and
`metadata.namespace`."""
FIELDS = tuple(sorted({field for fields in FIELDS_OF_KIND.values() for field in fields}))
"""Every field some kind can be selected by."""


def fields_of(kind: str) -> tuple[str, ...]:
    """The selectable fields of `kind` (e.g. "Event")."""
    return FIELDS_OF_KIND.get(kind, ("metadata.name", "metadata.namespace"))


_FIELD_TERM = re.compile(r"\s*(?P<field>[^\s!=]*)\s*(?P<op>==|!=|=)\s*(?P<value>[A-Za-z0-9._-]*)\s*", re.ASCII)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """`field = value` or `field != value`; a field the object lacks reads as ""."""

    field: str
    operator: Literal["=", "!="]
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether `fields` (as from `object_fields`) satisfy this requirement."""
        return (fields.get(self.field, "") == self.value) == (self.operator == "=")

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{self.value}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A conjunction of field requirements over `FIELDS`; no requirements selects everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str, *, kind: str = "") -> FieldSelector:
        """Parse `field=value`, `field==value` and `field!=value` terms joined by commas.

        Raises `Invalid` (field `fieldSelector`) for a syntax error or a field outside `fields_of(kind)` (outside
        `FIELDS` when no kind is given).
        """
        if not text.strip():
            return cls()
        supported = fields_of(kind) if kind else FIELDS
        of_kind = f" of {kind}" if kind else ""
        requirements = []
        for term in text.split(","):
            match = _FIELD_TERM.fullmatch(term)
            if match is None:
                expected = "expected 'field=value', 'field==value' or 'field!=value'"
                raise _field_error(f"{expected}, found {_short(term.strip())}")
            if match["field"] not in supported:
                field = _short(match["field"])
                raise _field_error(f"unknown field {field}: supported fields{of_kind} are {', '.join(supported)}")
            operator: Literal["=", "!="] = "!=" if match["op"] == "!=" else "="
            requirements.append(FieldRequirement(match["field"], operator, match["value"]))
        return cls(tuple(requirements))

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether every requirement holds for `fields`."""
        return all(r.matches(fields) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True when the selector has no requirements (and so matches everything)."""
        return not self.requirements

    @property
    def equality(self) -> tuple[str, str] | None:
        """(field, value) of the first `field=value` requirement: every object this selector matches has that
        value — what a watch cache files the watcher under. None when there is no such requirement."""
        return next(((r.field, r.value) for r in self.requirements if r.operator == "="), None)

    def also(self, field: str, value: str) -> FieldSelector:
        """This selector and `field=value` (after the selector's own terms, so `equality` stays theirs)."""
        return FieldSelector((*self.requirements, FieldRequirement(field, "=", value)))

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _field_error(description: str) -> Invalid:
    return Invalid.of([FieldViolation("fieldSelector", description)], what="field selector")


def object_fields(obj: Message) -> dict[str, str]:
    """The selectable fields of a v1 object: the keys of `fields_of` its kind ("" where unset)."""
    fields = {"metadata.name": "", "metadata.namespace": ""}
    metadata = getattr(obj, "metadata", None)
    if metadata is not None:
        fields["metadata.name"] = metadata.name
        fields["metadata.namespace"] = metadata.namespace
    full_name = obj.DESCRIPTOR.full_name
    if full_name == "caravanserai.v1.Project":
        status = getattr(obj, "status")
        fields["status.phase"] = status.phase
        fields["status.nodeRef"] = status.node_ref
    elif full_name == "caravanserai.v1.Event":
        spec = getattr(obj, "spec")
        fields["involvedObject.kind"] = spec.involved_object.kind
        fields["involvedObject.name"] = spec.involved_object.name
        fields["involvedObject.namespace"] = spec.involved_object.namespace
        fields["involvedObject.uid"] = spec.involved_object.uid
        fields["reason"] = spec.reason
        fields["type"] = spec.type
    return fields


__all__ = [
    "DNS_LABEL_MESSAGE",
    "DNS_SUBDOMAIN_MESSAGE",
    "FIELDS",
    "FIELDS_OF_KIND",
    "FieldRequirement",
    "FieldSelector",
    "LabelOperator",
    "LabelRequirement",
    "LabelSelector",
    "fields_of",
    "object_fields",
    "validate_dns_label",
    "validate_dns_subdomain",
    "validate_label_key",
    "validate_label_value",
]
