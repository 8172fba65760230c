"""Files of Secret and Config volumes on the node, bind-mounted read-only into containers.

Layout: `<root>/<project>/<volume>-<digest>/<key>`, one file per key (`<project>`: `naming.project_part`, a
`default` project's name). The default root is under `/dev/shm`
(tmpfs), so secret values never reach a disk; `cara-agent --data-dir` moves it.

Guarantees:

* **No other local user reads them.** The root and project directories are 0700 and owned by the agent (root),
  so no other user of the node can reach a file even though its path shows in `/proc/*/mountinfo`; the volume
  directory is 0700 and each file has the volume's mode (default 0400), both owned by the service's user
  (`file_owner`): "uid" or "uid:gid" are used as they are (a uid alone keeps group 0, as Docker does for a uid
  without a passwd entry), no user (the image's default, root for most images) means root. A user given by name
  ("app", "app:app") cannot be resolved without the image's passwd: its files stay root-owned, the directory
  0755 and the default mode 0444 so the service can read them; the 0700 directories above still keep every
  other user of the node out. Give a numeric user for 0400 files owned by the service.

* **Written once, never changed in place.** A directory is named after the digest of its content and written
  completely (into a temporary directory renamed into place) before any container mounts it, so a running
  container never sees a half-written or changed file; new data means a new directory (and a new container,
  since the digest is part of the spec hash).
* **Removed with the project** (`remove`), and older directories of a project when `prune` is told what stays.
* Only this agent's root is touched; names come from validated DNS labels and data keys.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from caravanserai.agent.docker import naming

DEFAULT_MODE = 0o400
"""The mode of the files of a data volume whose owner is known (the manifest's `mode` wins)."""
SHARED_MODE = 0o444
"""The default mode when the service's user is a name the agent cannot resolve (files stay root-owned)."""
PRIVATE_DIR = 0o700

Owner = tuple[int, int]


def file_owner(user: str) -> Owner | None:
    """The uid and gid owning a service's data files: "" → root, "uid" → (uid, 0), "uid:gid" → both, "root" →
    root; None for a user given by name (the image's passwd would be needed)."""
    name, _, group = user.partition(":")
    if name in ("", "root", "0") and group in ("", "root", "0"):
        return (0, 0)
    if name.isdigit() and (group == "" or group.isdigit()):
        return (int(name), int(group or 0))
    return None


def default_mode(owner: Owner | None) -> int:
    """The file mode when the manifest gives none: 0400 for a known owner, 0444 when the owner is unknown."""
    return DEFAULT_MODE if owner is not None else SHARED_MODE


def default_root(node: str) -> str:
    """The default data directory of the agent of `node` (on tmpfs)."""
    return f"/dev/shm/caravanserai-agent/{node}"


def content_digest(files: Mapping[str, bytes], mode: int, owner: Owner | None = (0, 0)) -> str:
    """A hash of the files, their mode and their owner."""
    digest = hashlib.sha256(f"{mode:o} {owner}".encode())
    for key in sorted(files):
        digest.update(b"\0" + key.encode() + b"\0" + hashlib.sha256(files[key]).digest())
    return digest.hexdigest()


class DataFiles:
    """The data volume directories of one agent, under `root`."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def owner_for(self, user: str) -> Owner | None:
        """Who will own the files of a service running as `user` (`file_owner`), or None when the agent cannot
        give them that owner (it does not run as root): then they are shared as for a named user."""
        owner = file_owner(user)
        if owner is None or os.geteuid() == 0 or owner == (os.geteuid(), os.getegid()):
            return owner
        return None

    def write(
        self, project: str, volume: str, files: Mapping[str, bytes], *, mode: int, owner: Owner | None = (0, 0)
    ) -> str:
        """The directory holding `files` (key → content) with `mode`, owned by `owner` (None: root, directory
        0755), written unless it exists; its path."""
        target = self.root / naming.project_part(project) / f"{volume}-{content_digest(files, mode, owner)[:16]}"
        if target.is_dir():
            return str(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, PRIVATE_DIR)
        os.chmod(target.parent, PRIVATE_DIR)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))  # 0700
        try:
            for key, content in files.items():
                path = staging / key
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(content)
                _own(path, owner)
                os.chmod(path, mode)
            _own(staging, owner)
            os.chmod(staging, PRIVATE_DIR if owner is not None else 0o755)
            os.rename(staging, target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.is_dir():
                raise
        return str(target)

    def prune(self, project: str, keep: set[str]) -> None:
        """Remove the project's directories other than those in `keep` (paths returned by `write`)."""
        base = self.root / naming.project_part(project)
        if not base.is_dir():
            return
        for child in base.iterdir():
            if str(child) not in keep:
                shutil.rmtree(child, ignore_errors=True)

    def remove(self, project: str) -> None:
        """Remove every file of the project."""
        shutil.rmtree(self.root / naming.project_part(project), ignore_errors=True)


def _own(path: Path, owner: Owner | None) -> None:
    """Give `path` to `owner` (the agent runs as root, or `owner` is the agent itself: `owner_for`)."""
    if owner is None or owner == (os.geteuid(), os.getegid()):
        return
    os.chown(path, *owner)


__all__ = [
    "DEFAULT_MODE",
    "SHARED_MODE",
    "DataFiles",
    "Owner",
    "content_digest",
    "default_mode",
    "default_root",
    "file_owner",
]
