"""The fence deadline record: what the agent promises the node's watchdog, in a directory both of them read.

    files = FenceFiles(Path("/var/lib/caravanserai/fence"), node="w0")
    files.write_deadline(Deadline(at=clock.monotonic() + 270, boot_id=files.boot_id, fence_after=270, stop_timeout=10))
    deadline = files.read_deadline()                     # None: no record (never armed)
    deadline.left(clock.monotonic(), files.boot_id)      # seconds to go; negative once passed; -inf from another boot
    files.write_stopped(deadline, {"web"})               # the watchdog: the projects it stopped for that deadline
    files.read_stopped(deadline)                         # the agent, lifting its fence

Guarantees:

* **Atomic**: each file is written under a temporary name and renamed over the old one, so a reader sees the whole
  old record or the whole new one; a writer killed midway leaves the old one.
* **One writer per file**: `<node>.deadline.json` is the agent's, `<node>.stopped.json` the watchdog's.
* **Bound to one boot**: a deadline is CLOCK_MONOTONIC seconds (one clock for every process of a boot; the
  `SystemClock`'s monotonic) with the boot's id (`/proc/sys/kernel/random/boot_id`); read after a reboot it has
  passed (`left` is −∞), so what Docker restarted at boot is stopped before anything else.
* **Disarmed**: a record with `fence_after` 0 (an agent run with `--fence-after 0`) has no deadline.
* **Notes follow their deadline**: `read_stopped` returns the projects noted for exactly that deadline (same time,
  same boot), so a note left from an earlier outage never restarts anything.
* A file that cannot be read or parsed counts as absent (logged); a failed write raises `OSError`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def read_boot_id(path: Path = BOOT_ID) -> str:
    """This boot's id ("" where the kernel does not say: then every record counts as this boot's)."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class Deadline:
    """The moment every container of the node must have stopped unless the agent renews it first.

    `at`: CLOCK_MONOTONIC seconds of the boot `boot_id`; `fence_after`: the agent's `--fence-after` (0: disarmed,
    no deadline); `stop_timeout`: the agent's `--stop-timeout`, for containers without a stopGracePeriod label."""

    at: float
    boot_id: str
    fence_after: float
    stop_timeout: int

    @property
    def armed(self) -> bool:
        return self.fence_after > 0

    def left(self, now: float, boot_id: str) -> float:
        """Seconds from `now` (monotonic) to the deadline: negative once it has passed, −∞ when it was written on
        another boot, +∞ when disarmed."""
        if not self.armed:
            return math.inf
        if self.boot_id != boot_id:
            return -math.inf
        return self.at - now

    def as_json(self) -> dict[str, Any]:
        return {"at": self.at, "bootId": self.boot_id, "fenceAfter": self.fence_after, "stopTimeout": self.stop_timeout}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Deadline:
        """KeyError, TypeError or ValueError for a record that is not one."""
        return cls(
            at=float(data["at"]),
            boot_id=str(data["bootId"]),
            fence_after=float(data["fenceAfter"]),
            stop_timeout=int(data["stopTimeout"]),
        )


class FenceFiles:
    """The node's two files in `directory` (see the module docstring). `boot_id` defaults to this boot's."""

    def __init__(self, directory: Path, node: str, *, boot_id: str | None = None) -> None:
        self.directory = directory
        self.node = node
        self.boot_id = read_boot_id() if boot_id is None else boot_id
        self.deadline_path = directory / f"{node}.deadline.json"
        self.stopped_path = directory / f"{node}.stopped.json"

    def write_deadline(self, deadline: Deadline) -> None:
        """The agent: replace the record (atomically)."""
        self._write(self.deadline_path, {"node": self.node, **deadline.as_json()})

    def read_deadline(self) -> Deadline | None:
        """The record, or None when there is none (or it cannot be read)."""
        data = self._read(self.deadline_path)
        if data is None:
            return None
        try:
            return Deadline.from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("fence record unreadable; counted as absent", path=str(self.deadline_path), error=str(exc))
            return None

    def write_stopped(self, deadline: Deadline, projects: set[str]) -> None:
        """The watchdog: the projects whose containers it stopped for `deadline` (replaces any earlier note)."""
        self._write(self.stopped_path, {"deadline": deadline.as_json(), "projects": sorted(projects)})

    def read_stopped(self, deadline: Deadline) -> set[str]:
        """The projects the watchdog noted for exactly `deadline` (none for a note of another deadline)."""
        data = self._read(self.stopped_path)
        try:
            if data is None or Deadline.from_json(data["deadline"]) != deadline:
                return set()
            return {str(p) for p in data["projects"]}
        except (KeyError, TypeError, ValueError) as exc:
            log.error("fence note unreadable; ignored", path=str(self.stopped_path), error=str(exc))
            return set()

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(data, out)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.error("fence file unreadable; counted as absent", path=str(path), error=str(exc))
            return None
        return data if isinstance(data, dict) else None


__all__ = ["BOOT_ID", "Deadline", "FenceFiles", "read_boot_id"]
