"""The state handlers react to ("essence": spec, labels, annotations, generation), kept on the object in an
annotation, and the difference between two of them as field paths.

The annotation makes the layer level-based across restarts (kopf's last-handled configuration): an object without
it was never handled (create), one whose essence differs from it changed (update), one equal to it needs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

ANNOTATION_PREFIX = "operator.caravanserai.io/last-handled-"

Essence = dict[str, Any]


def annotation_key(operator: str) -> str:
    """The annotation holding what operator `operator` handled last."""
    return ANNOTATION_PREFIX + operator


def essence_of(obj: Any, *, ignore: str) -> Essence:
    """The handled state of `obj`: spec (protobuf JSON), labels, annotations except `ignore`, generation."""
    annotations = {k: v for k, v in obj.metadata.annotations.items() if k != ignore}
    return {
        "generation": int(obj.metadata.generation),
        "labels": dict(obj.metadata.labels),
        "annotations": annotations,
        "spec": json_format.MessageToDict(obj.spec, preserving_proto_field_name=True),
    }


def encode(essence: Essence) -> str:
    return json.dumps(essence, sort_keys=True, separators=(",", ":"))


def decode(text: str) -> Essence | None:
    """The essence stored in an annotation, or None when there is none (or it cannot be read)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def diff(old: Essence | None, new: Essence) -> tuple[str, ...]:
    """The paths that differ, sorted, with protobuf field names: `spec.keep_last`, `metadata.labels.team`,
    `metadata.annotations.x`."""
    before = old or {}
    paths: set[str] = set()
    _walk("spec", before.get("spec"), new.get("spec"), paths)
    _walk("metadata.labels", before.get("labels"), new.get("labels"), paths)
    _walk("metadata.annotations", before.get("annotations"), new.get("annotations"), paths)
    return tuple(sorted(paths))


def _walk(path: str, old: Any, new: Any, out: set[str]) -> None:
    if old == new:
        return
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in set(old) | set(new):
            _walk(f"{path}.{key}", old.get(key), new.get(key), out)
        return
    out.add(path)


def touches(paths: tuple[str, ...], field: str) -> bool:
    """Whether a change of `paths` concerns `field` (equal, inside it, or containing it)."""
    return any(p == field or p.startswith(field + ".") or field.startswith(p + ".") for p in paths)


__all__ = ["ANNOTATION_PREFIX", "Essence", "annotation_key", "decode", "diff", "encode", "essence_of", "touches"]
