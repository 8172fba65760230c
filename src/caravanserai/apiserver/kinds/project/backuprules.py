"""The rules of a project volume's backups and restores (`backup`, `restore`, `restoreRequest`), called for each
volume by `rules.project_spec`. Every violation names its field (`spec.volumes[i].backup.every` …).

* `backup` only on a Persistent volume. There `repository` is required, a BackupRepository's name (DNS
  subdomain; whether it exists is not checked, as Kubernetes does not check references); `every` is required, a
  duration (`caravanserai.text.durations`) between `MIN_EVERY` (10s) and `MAX_DURATION`; every `keep` count is
  0 or more and at least one is above 0; `before`, when set, names a service of the project that mounts this
  volume, a non-empty command whose first word is set, and an optional `timeout`, a duration above 0 and at most
  `MAX_DURATION`.
* `restore` is "Latest", "Never" or empty (for Latest: empty is read as Latest everywhere; the server does not
  store the default, as for the volume's `type`), and only on a Persistent volume.
* `restoreRequest`, when it carries anything, needs `backup` on the volume, a `snapshot` of 8 to 64 lowercase
  hex digits (a restic id or a unique prefix) and a `requestedAt`.

Pure; nothing is defaulted.
"""

from __future__ import annotations

import math
import re

from caravanserai import v1
from caravanserai.project import backups
from caravanserai.text.durations import parse_duration
from caravanserai.text.selectors import validate_reference
from caravanserai.text.violations import Violations, quote

MIN_EVERY = 10.0
"""The shortest backup interval, in seconds."""
MAX_DURATION = 365 * 86400.0
"""The longest backup interval or hook timeout, in seconds (one year)."""
SNAPSHOT_ID = re.compile(r"[0-9a-f]{8,64}")
"""A snapshot id as `restoreRequest.snapshot` takes it: a restic id or a prefix of at least 8 hex digits."""
_KEEP = ("last", "hourly", "daily", "weekly", "monthly")


def volume_backups(errors: Violations, path: str, volume: v1.Volume, spec: v1.ProjectSpec) -> None:
    """The `backup`, `restore` and `restoreRequest` of the volume at `path` (`spec.volumes[i]`) of `spec`."""
    persistent = backups.is_persistent(volume)
    if volume.HasField("backup"):
        if persistent:
            _backup(errors, f"{path}.backup", volume, spec)
        else:
            errors.add(f"{path}.backup", "backups are only for Persistent volumes")
    if volume.restore:
        if persistent:
            errors.choice(f"{path}.restore", volume.restore, v1.RESTORE_POLICIES, empty="for Latest")
        else:
            errors.add(f"{path}.restore", "is only for Persistent volumes")
    if volume.HasField("restore_request") and volume.restore_request.ByteSize():
        _restore_request(errors, f"{path}.restoreRequest", volume)


def _backup(errors: Violations, path: str, volume: v1.Volume, spec: v1.ProjectSpec) -> None:
    backup = volume.backup
    if errors.required(f"{path}.repository", backup.repository):
        errors.check(f"{path}.repository", validate_reference(backup.repository))
    if errors.required(f"{path}.every", backup.every):
        _duration(errors, f"{path}.every", backup.every, at_least=MIN_EVERY)
    _keep(errors, f"{path}.keep", backup.keep)
    if backup.HasField("before"):
        _hook(errors, f"{path}.before", backup.before, volume.name, spec)


def _duration(errors: Violations, path: str, text: str, *, at_least: float) -> None:
    """`text` must be a duration of at least `at_least` seconds (above 0 when `at_least` is 0) and at most
    `MAX_DURATION`."""
    try:
        seconds = parse_duration(text)
    except ValueError:
        errors.add(path, f"must be a duration such as 30s, 5m or 1h30m, not {quote(text)}")
        return
    if not math.isfinite(seconds) or seconds > MAX_DURATION:
        errors.add(path, f"must be at most 365d, not {quote(text)}")
    elif at_least and seconds < at_least:
        errors.add(path, f"must be at least {at_least:g}s, not {quote(text)}")
    elif seconds <= 0:
        errors.add(path, f"must be above 0, not {quote(text)}")


def _keep(errors: Violations, path: str, keep: v1.BackupRetention) -> None:
    counts = {name: getattr(keep, name) for name in _KEEP}
    for name, count in counts.items():
        errors.non_negative(f"{path}.{name}", count)
    if not any(count > 0 for count in counts.values()):
        errors.add(path, "keep at least one snapshot: set one of last, hourly, daily, weekly, monthly above 0")


def _hook(errors: Violations, path: str, hook: v1.BackupHook, volume: str, spec: v1.ProjectSpec) -> None:
    if errors.required(f"{path}.service", hook.service):
        service = next((s for s in spec.services if s.name == hook.service), None)
        if service is None:
            errors.add(f"{path}.service", f"service {quote(hook.service)} is not declared in spec.services")
        elif not any(mount.name == volume for mount in service.volume_mounts):
            errors.add(f"{path}.service", f"service {quote(hook.service)} does not mount volume {quote(volume)}")
    if not hook.command:
        errors.add(f"{path}.command", "is required: the command to run and its arguments")
    elif not hook.command[0]:
        errors.add(f"{path}.command[0]", "is required: the program to run")
    if hook.timeout:
        _duration(errors, f"{path}.timeout", hook.timeout, at_least=0)


def _restore_request(errors: Violations, path: str, volume: v1.Volume) -> None:
    request = volume.restore_request
    if not (backups.is_persistent(volume) and volume.HasField("backup")):
        errors.add(path, "needs a backup on the volume: only a backed-up volume has snapshots to restore")
    if errors.required(f"{path}.snapshot", request.snapshot) and not SNAPSHOT_ID.fullmatch(request.snapshot):
        errors.add(f"{path}.snapshot", f"must be 8 to 64 lowercase hex digits, not {quote(request.snapshot)}")
    if not request.HasField("requested_at"):
        errors.add(f"{path}.requestedAt", "is required with a snapshot: when the restore was asked for")


__all__ = ["MAX_DURATION", "MIN_EVERY", "SNAPSHOT_ID", "volume_backups"]
