"""Files of Secret and Config volumes on the node, bind-mounted read-only into containers.

Layout: `<root>/<project>/<volume>-<digest>/<key>`, one file per key with the volume's mode (default 0444). The
default root is under `/dev/shm` (tmpfs), so secret values never reach a disk; `cara-agent --data-dir` moves it.

Guarantees:

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

DEFAULT_MODE = 0o444


def default_root(node: str) -> str:
    """The default data directory of the agent of `node` (on tmpfs)."""
    return f"/dev/shm/caravanserai-agent/{node}"


def content_digest(files: Mapping[str, bytes], mode: int) -> str:
    """A hash of the files and their mode."""
    digest = hashlib.sha256(f"{mode:o}".encode())
    for key in sorted(files):
        digest.update(b"\0" + key.encode() + b"\0" + hashlib.sha256(files[key]).digest())
    return digest.hexdigest()


class DataFiles:
    """The data volume directories of one agent, under `root`."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def write(self, project: str, volume: str, files: Mapping[str, bytes], *, mode: int) -> str:
        """The directory holding `files` (key → content) with `mode`, written unless it exists; its path."""
        target = self.root / project / f"{volume}-{content_digest(files, mode)[:16]}"
        if target.is_dir():
            return str(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)
        os.chmod(target.parent, 0o711)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        try:
            for key, content in files.items():
                path = staging / key
                path.write_bytes(content)
                os.chmod(path, mode)
            os.chmod(staging, 0o755)
            os.rename(staging, target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.is_dir():
                raise
        return str(target)

    def prune(self, project: str, keep: set[str]) -> None:
        """Remove the project's directories other than those in `keep` (paths returned by `write`)."""
        base = self.root / project
        if not base.is_dir():
            return
        for child in base.iterdir():
            if str(child) not in keep:
                shutil.rmtree(child, ignore_errors=True)

    def remove(self, project: str) -> None:
        """Remove every file of the project."""
        shutil.rmtree(self.root / project, ignore_errors=True)


__all__ = ["DEFAULT_MODE", "DataFiles", "content_digest", "default_root"]
