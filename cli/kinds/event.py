"""Events in caractrl: the `get` table (ordered by when they last happened), `get events --for KIND/NAME` and the
`describe` layout.

    LAST SEEN TYPE REASON OBJECT MESSAGE   (wide: + SOURCE COUNT FIRST SEEN NAME, before MESSAGE)
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.cli.describe_other import describe_event
from caravanserai.cli.kinds.base import KindView, offline
from caravanserai.cli.printers import UNKNOWN, age, or_none
from caravanserai.cli.tables import Columns, RowContext, event_last_seen
from caravanserai.text.durations import format_duration


def involved(event: v1.Event) -> str:
    """`project/web` for the object an event is about."""
    ref = event.spec.involved_object
    return f"{ref.kind.lower()}/{ref.name}"


def event_row(event: v1.Event, ctx: RowContext, wide: bool) -> list[str]:
    spec = event.spec
    last = event_last_seen(event)
    row = [format_duration(ctx.now - last) if last else UNKNOWN, spec.type, spec.reason, involved(event)]
    if wide:
        source = ",".join(p for p in (spec.source.component, spec.source.host) if p)
        first = age(spec.first_timestamp, ctx.now)
        row += [or_none(source), str(max(spec.count, 1)), first, event.metadata.name]
    row.append(spec.message)
    return row


def about(kind: meta.Kind, name: str) -> str:
    """The field selector of `get events --for KIND/NAME`: the events about that object."""
    return f"involvedObject.kind={kind.kind},involvedObject.name={name}"


VIEW = KindView(
    "events",
    Columns(
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"),
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SOURCE", "COUNT", "FIRST SEEN", "NAME", "MESSAGE"),
        event_row,
        sort_key=event_last_seen,
    ),
    describe=offline(describe_event),
    for_selector=about,
)

__all__ = ["VIEW", "about", "event_row", "involved"]
