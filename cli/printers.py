"""Output formats shared by every command: aligned tables, ages, and json/yaml/name renderings of objects.

Tables follow kubectl: upper-case headers, every column but the last padded to its widest cell plus three
spaces, no trailing blanks. `TableWriter` keeps the widths of what it printed so rows streamed later by
`get --watch` line up under the first table.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from ruamel.yaml import YAML

from caravanserai import meta, v1
from caravanserai.cli import jsonpath
from caravanserai.clock import rfc3339, seconds
from caravanserai.text.durations import format_duration
from caravanserai.text.protojson import to_data

COLUMN_GAP = 3
NONE = "<none>"
UNKNOWN = "<unknown>"


def format_rows(rows: Sequence[Sequence[str]], widths: Sequence[int]) -> list[str]:
    """The lines for `rows`, each column padded to `widths` (the last column unpadded)."""
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i] + COLUMN_GAP) for i, cell in enumerate(row[:-1])]
        lines.append(("".join(cells) + (row[-1] if row else "")).rstrip())
    return lines


def column_widths(rows: Iterable[Sequence[str]], start: Sequence[int] = ()) -> list[int]:
    """The widest cell of each column, at least `start`."""
    widths = list(start)
    for row in rows:
        for i, cell in enumerate(row):
            if i < len(widths):
                widths[i] = max(widths[i], len(cell))
            else:
                widths.append(len(cell))
    return widths


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A whole table: header line then one line per row."""
    everything = [list(headers), *rows]
    return format_rows(everything, column_widths(everything))


class TableWriter:
    """Prints a table, then further rows aligned with it (widening columns only when a cell is longer)."""

    def __init__(self, headers: Sequence[str], *, show_headers: bool = True) -> None:
        self.headers = list(headers)
        self.show_headers = show_headers
        self.widths = column_widths([self.headers])
        self._header_printed = False

    def lines(self, rows: Sequence[Sequence[str]]) -> list[str]:
        """The lines to print for `rows` (the header first, the first time)."""
        self.widths = column_widths(rows, self.widths)
        out = []
        if self.show_headers and not self._header_printed:
            out = format_rows([self.headers], self.widths)
            self._header_printed = True
        return out + format_rows(rows, self.widths)


# ---- cells --------------------------------------------------------------------------------------------------


def age(ts: Timestamp, now: float | None = None) -> str:
    """kubectl's age of a timestamp (5s, 3m, 2h, 4d); `<unknown>` when unset."""
    if not ts.seconds and not ts.nanos:
        return UNKNOWN
    return format_duration((time.time() if now is None else now) - seconds(ts))


def when(ts: Timestamp, now: float | None = None) -> str:
    """`2026-11-29T12:00:00Z (5m ago)`, or `<none>` when unset."""
    if not ts.seconds and not ts.nanos:
        return NONE
    return f"{rfc3339(ts)} ({age(ts, now)} ago)"


def key_values(pairs: Mapping[str, str], *, sep: str = ",") -> str:
    """`a=1,b=2` sorted by key, `<none>` when empty."""
    return sep.join(f"{k}={v}" for k, v in sorted(pairs.items())) or NONE


def or_none(text: str, placeholder: str = NONE) -> str:
    return text if text else placeholder


# ---- objects ------------------------------------------------------------------------------------------------


def resource_name(obj: Message) -> str:
    """`project/web`, as `-o name` and the verbs' confirmations print it."""
    return f"{meta.kind_of(obj).kind.lower()}/{meta.name_of(obj)}"


def object_dict(obj: Message) -> dict[str, Any]:
    """The manifest form of `obj` (camelCase keys, apiVersion and kind always set; enums at their zero value shown
    by name, which protobuf JSON leaves out)."""
    # obj is one of the kinds with_type_meta is constrained to, but typed here as their base, Message.
    typed = meta.with_type_meta(meta.copy(obj))  # type: ignore[type-var]  # obj is one of the kinds with_type_meta is constrained to, typed as Message
    return to_data(typed, enum_defaults=True)


def list_dict(objects: Sequence[Message], *, kind: str | None = None) -> dict[str, Any]:
    """`{apiVersion, kind: ProjectList, items: [...]}`; `kind: List` when the items are of several kinds."""
    kinds = {meta.kind_of(o).kind for o in objects}
    name = kind or (f"{kinds.pop()}List" if len(kinds) == 1 else "List")
    return {"apiVersion": v1.API_VERSION, "kind": name, "items": [object_dict(o) for o in objects]}


def render_objects(objects: Sequence[Message], fmt: str, *, single: bool, list_kind: str | None = None) -> str:
    """json, yaml or name output: one object as itself when `single`, else a list object."""
    if fmt == "name":
        return "".join(resource_name(o) + "\n" for o in objects)
    data = object_dict(objects[0]) if single and len(objects) == 1 else list_dict(objects, kind=list_kind)
    return render_data(data, fmt)


JSONPATH = "jsonpath="


def render_data(data: Any, fmt: str) -> str:
    """`data` as indented JSON or YAML text (the layout of `caravanserai.text.manifest`), ending with a newline; or
    as `jsonpath=TEMPLATE` makes it (`caravanserai.cli.jsonpath`), as it is."""
    if fmt.startswith(JSONPATH):
        return jsonpath.render(fmt.removeprefix(JSONPATH), data)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096  # long messages stay on one line
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


__all__ = [
    "COLUMN_GAP",
    "JSONPATH",
    "NONE",
    "UNKNOWN",
    "TableWriter",
    "age",
    "column_widths",
    "format_rows",
    "key_values",
    "list_dict",
    "object_dict",
    "or_none",
    "render_data",
    "render_objects",
    "render_table",
    "resource_name",
    "when",
]
