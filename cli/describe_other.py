"""`caractrl describe lease|event NAME`, and the description of any kind without a layout of its own.

* A lease: holder, when it was acquired and last renewed, its duration, whether it has expired by now (as a
  reader with this machine's clock would judge it) and its transitions.
* An event: the object it is about, type, reason, message, source, count and when it was first and last seen.
* Any other kind (custom kinds): metadata, then `Spec:` and `Status:` in their manifest form.

Every description ends with the events about the object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from caravanserai import meta, v1
from caravanserai.cli.layout import Writer, metadata_fields, write_events
from caravanserai.cli.printers import NONE, or_none, render_data, when
from caravanserai.clock import seconds
from caravanserai.text.durations import format_duration
from caravanserai.text.protojson import to_data


def lease_state(lease: v1.Lease, now: float) -> str:
    """`held by X, expires in 9s` / `held by X, expired 3s ago` / `free (released)`."""
    spec = lease.spec
    if not spec.holder_identity:
        return "free (released)"
    if not spec.HasField("renew_time"):
        return f"held by {spec.holder_identity}"
    left = seconds(spec.renew_time) + spec.lease_duration_seconds - now
    if left >= 0:
        return f"held by {spec.holder_identity}, expires in {format_duration(left)}"
    return f"held by {spec.holder_identity}, expired {format_duration(-left)} ago"


def describe_lease(lease: v1.Lease, events: Sequence[v1.Event], now: float) -> str:
    spec = lease.spec
    out = Writer()
    out.fields(
        [
            ("Name", lease.metadata.name),
            ("Kind", "Lease"),
            ("State", lease_state(lease, now)),
            ("Holder", or_none(spec.holder_identity)),
            ("Acquired", when(spec.acquire_time, now) if spec.HasField("acquire_time") else NONE),
            ("Renewed", when(spec.renew_time, now) if spec.HasField("renew_time") else NONE),
            ("Duration", f"{spec.lease_duration_seconds}s"),
            ("Transitions", str(spec.lease_transitions)),
            *metadata_fields(lease, now),
        ]
    )
    write_events(out, events, now)
    return out.text()


def describe_event(event: v1.Event, events: Sequence[v1.Event], now: float) -> str:
    spec = event.spec
    about = spec.involved_object
    source = "/".join(p for p in (spec.source.component, spec.source.host) if p) or NONE
    out = Writer()
    out.fields(
        [
            ("Name", event.metadata.name),
            ("Kind", "Event"),
            ("Involved Object", f"{about.kind.lower()}/{about.name}" if about.kind else or_none(about.name)),
            ("Object UID", or_none(about.uid)),
            ("Type", or_none(spec.type)),
            ("Reason", or_none(spec.reason)),
            ("Message", or_none(spec.message)),
            ("Source", source),
            ("Count", str(spec.count)),
            ("First Seen", when(spec.first_timestamp, now) if spec.HasField("first_timestamp") else NONE),
            ("Last Seen", when(spec.last_timestamp, now) if spec.HasField("last_timestamp") else NONE),
            *metadata_fields(event, now),
        ]
    )
    write_events(out, events, now)
    return out.text()


def describe_secret(secret: v1.Secret, events: Sequence[v1.Event], now: float) -> str:
    """Type and keys with their sizes: never a value (`caractrl get secret NAME -o yaml` shows them, base64, to
    identities allowed to read them)."""
    out = Writer()
    out.fields(
        [
            ("Name", secret.metadata.name),
            ("Kind", "Secret"),
            ("Type", secret.spec.type or v1.SECRET_OPAQUE),
            *metadata_fields(secret, now),
        ]
    )
    out.heading("Data")
    out.table(("KEY", "SIZE"), [[key, f"{len(secret.spec.data[key])} bytes"] for key in sorted(secret.spec.data)], 1)
    write_events(out, events, now)
    return out.text()


def _section(out: Writer, title: str, message: Any) -> None:
    data = to_data(message, enum_defaults=True)
    if not data:
        out.heading(title, value=NONE)
        return
    out.heading(title)
    out.lines.extend(f"  {line}" for line in render_data(data, "yaml").splitlines())


def describe_generic(obj: Any, events: Sequence[v1.Event], now: float) -> str:
    """Metadata, spec and status of an object of any kind."""
    out = Writer()
    out.fields([("Name", meta.name_of(obj)), ("Kind", meta.kind_of(obj).kind), *metadata_fields(obj, now)])
    for title, field in (("Spec", "spec"), ("Status", "status")):
        if field in obj.DESCRIPTOR.fields_by_name:
            _section(out, title, getattr(obj, field))
    write_events(out, events, now)
    return out.text()


__all__ = ["describe_event", "describe_generic", "describe_lease", "describe_secret", "lease_state"]
