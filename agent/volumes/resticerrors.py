"""restic's failures turned into one clear line each: what went wrong, with which repository, and what to do.

    raise classify(stderr, url=repository.url, action="backup")

Guarantees:

* **One line, no secret.** Every message is a single line naming the repository by its URL with any password in
  it replaced by `***` (`redact`); restic's environment (the Secret's keys) never appears in a message.
* **Known faults by kind** (`ResticError.kind`): `WRONG_PASSWORD`, `UNREACHABLE`, `NOT_INITIALISED`,
  `SNAPSHOT_NOT_FOUND`, `DISK_FULL` (ENOSPC, "no space left on device"), `LOCKED` (another restic holds the
  repository's lock), `TIMEOUT`, `REPOSITORY` (the BackupRepository or its Secret cannot be used), `EMPTY`
  (restic 0.14 refuses to save a snapshot of an empty directory) and `FAILED`
  (anything else: restic's last meaningful line of stderr). The first matching kind wins, in that order of
  specificity; a wrong password is never mistaken for an unreachable repository.
* Pure: no I/O.
"""

from __future__ import annotations

import re

from caravanserai.errors import CaravanseraiError

WRONG_PASSWORD = "WrongPassword"
UNREACHABLE = "Unreachable"
NOT_INITIALISED = "NotInitialised"
SNAPSHOT_NOT_FOUND = "SnapshotNotFound"
DISK_FULL = "DiskFull"
LOCKED = "Locked"
TIMEOUT = "Timeout"
REPOSITORY = "Repository"
EMPTY = "Empty"
FAILED = "Failed"

_UNREACHABLE_SIGNS = (
    "connection refused",
    "no such host",
    "i/o timeout",
    "network is unreachable",
    "no route to host",
    "connection reset",
    "tls handshake",
    "server misbehaving",
    "dial tcp",
    "context deadline exceeded",
)
_MISSING_SIGNS = ("no such file or directory", "does not exist", "404", "not found", "nosuchbucket", "nosuchkey")
_USERINFO = re.compile(r"(//[^/@:]*:)[^/@]*@")
_PREFIX = re.compile(r'no matching ID found for prefix "([^"]*)"', re.IGNORECASE)


class ResticError(CaravanseraiError):
    """A restic command (or the repository's configuration) failed; `kind` says how, `message` is one line."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def redact(url: str) -> str:
    """`url` with the password of any `user:password@` part replaced by `***`."""
    return _USERINFO.sub(r"\1***@", url)


def _lines(stderr: str) -> list[str]:
    """Meaningful lines of restic's stderr, without "Fatal: " and without its hints."""
    out = []
    for raw in stderr.splitlines():
        line = raw.strip()
        if not line or line.startswith("Is there a repository at the following location?"):
            continue
        out.append(line.removeprefix("Fatal: "))
    return out


def _detail(lines: list[str], signs: tuple[str, ...]) -> str:
    """The last line carrying one of `signs` (from the sign on, e.g. "dial tcp …: connection refused")."""
    for line in reversed(lines):
        lower = line.lower()
        for sign in signs:
            if sign in lower:
                start = lower.find("dial tcp") if "dial tcp" in lower else lower.find(sign)
                return line[start:]
    return lines[-1] if lines else ""


def classify(stderr: str, *, url: str, action: str) -> ResticError:
    """The `ResticError` for restic's `stderr` after a failed `action` (backup, restore, …) on repository `url`."""
    where = redact(url)
    lines = [redact(line) for line in _lines(stderr) if line.rstrip("/") != url.rstrip("/")]
    text = "\n".join(lines).lower()
    if "wrong password" in text:
        return ResticError(WRONG_PASSWORD, f"repository {where}: wrong password (no key opens it with RESTIC_PASSWORD)")
    if "no space left on device" in text or "enospc" in text:
        return ResticError(DISK_FULL, f"restic {action}: the disk is full (no space left on device)")
    if "repository is already locked" in text or "unable to create lock" in text:
        return ResticError(LOCKED, f"repository {where} is locked by another restic: {_detail(lines, ('locked',))}")
    if any(sign in text for sign in _UNREACHABLE_SIGNS):
        return ResticError(UNREACHABLE, f"repository {where} is unreachable: {_detail(lines, _UNREACHABLE_SIGNS)}")
    if "unable to open config file" in text and any(sign in text for sign in _MISSING_SIGNS):
        return ResticError(
            NOT_INITIALISED, f"repository {where} is not initialised; set spec.initialize or run restic init"
        )
    if "snapshot is empty" in text:
        return ResticError(EMPTY, f"restic {action}: the volume is empty (restic saves no empty snapshot)")
    prefix = _PREFIX.search("\n".join(lines))
    if prefix is not None or "no matching id found" in text:
        wanted = prefix.group(1) if prefix is not None else "?"
        return ResticError(SNAPSHOT_NOT_FOUND, f"snapshot {wanted} not found in repository {where}")
    last = lines[-1] if lines else "no message"
    return ResticError(FAILED, f"restic {action} failed: {last}")


def not_found(snapshot: str, url: str) -> ResticError:
    """The error for a snapshot id (or prefix) that names no snapshot of the volume."""
    return ResticError(SNAPSHOT_NOT_FOUND, f"snapshot {snapshot} not found in repository {redact(url)}")


__all__ = [
    "DISK_FULL",
    "EMPTY",
    "FAILED",
    "LOCKED",
    "NOT_INITIALISED",
    "REPOSITORY",
    "ResticError",
    "SNAPSHOT_NOT_FOUND",
    "TIMEOUT",
    "UNREACHABLE",
    "WRONG_PASSWORD",
    "classify",
    "not_found",
    "redact",
]
