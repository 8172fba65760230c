"""A tiny local Docker image for tests, built without any registry.

    image = ensure_test_image()            # "caravanserai/busybox:test"
    project = builders.project("web", image=image)

No registry is reachable from test machines, so tests must never pull. `ensure_test_image` makes an image with
`docker import` from a static busybox binary (Debian package `busybox-static`): a root file system holding
`bin/busybox`, symlinks for the common applets (`sh sleep httpd cat echo ls nc wget env printf true false`) and
an empty `tmp/`.

Guarantees:

* **Idempotent.** When the image already exists nothing is built; concurrent callers at worst import the same
  tar twice, and the tag ends on an equivalent image.
* **No CMD.** Images made by `docker import` have no command: every container needs one (services set
  `command` or `args`).
* **Clear failures.** A missing `docker` CLI, a daemon that does not answer or a missing busybox raise
  `TestImageError` naming what to install or start.

It uses the `docker` command line (not aiodocker, which only the agent imports) and blocks; call it from a
session fixture or through `asyncio.to_thread`.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile

DEFAULT_IMAGE = "caravanserai/busybox:test"
"""The tag `ensure_test_image` creates when no name is given."""

APPLETS = ("sh", "sleep", "httpd", "cat", "echo", "ls", "nc", "wget", "env", "printf", "true", "false")
"""Busybox applets linked into /bin of the test image."""

BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")


class TestImageError(RuntimeError):
    """The test image could not be made (no docker CLI, no daemon, no static busybox)."""

    __test__ = False  # not a pytest test class


def _docker(*args: str, stdin: bytes | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
    docker = shutil.which("docker")
    if docker is None:
        raise TestImageError("the docker CLI is not installed (Debian package docker.io)")
    return subprocess.run([docker, *args], input=stdin, capture_output=True, timeout=timeout, check=False)


def image_exists(name: str) -> bool:
    """Whether the local Docker engine has an image called `name` (raises when the daemon does not answer)."""
    result = _docker("image", "inspect", "--format", "{{.Id}}", name)
    if result.returncode == 0:
        return True
    stderr = result.stderr.decode(errors="replace")
    if "No such image" in stderr or "No such object" in stderr:
        return False
    raise TestImageError(f"docker image inspect {name} failed: {stderr.strip()}")


def find_busybox(candidates: tuple[str, ...] = BUSYBOX_CANDIDATES) -> str:
    """The path of a busybox binary to put in the image (the static one of `busybox-static`)."""
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise TestImageError(
        f"no busybox binary found in {', '.join(candidates)}; install the Debian package busybox-static"
    )


def rootfs_tar(busybox: str, applets: tuple[str, ...] = APPLETS) -> bytes:
    """An uncompressed tar of the image's root file system: bin/busybox, one symlink per applet, tmp/."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(_directory("bin", 0o755))
        tar.addfile(_directory("tmp", 0o1777))
        with open(busybox, "rb") as binary:
            data = binary.read()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in applets:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            link.mode = 0o777
            tar.addfile(link)
    return buffer.getvalue()


def _directory(name: str, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    return info


def ensure_test_image(name: str = DEFAULT_IMAGE, *, busybox: str | None = None) -> str:
    """Make sure the local engine has the busybox test image `name`; build it with `docker import` if missing.

    Returns `name`. Never contacts a registry. Blocking (it runs the docker CLI).
    """
    if image_exists(name):
        return name
    tar = rootfs_tar(busybox or find_busybox())
    result = _docker("import", "--message", "caravanserai test image (static busybox)", "-", name, stdin=tar)
    if result.returncode != 0:
        raise TestImageError(f"docker import {name} failed: {result.stderr.decode(errors='replace').strip()}")
    return name


__all__ = [
    "APPLETS",
    "DEFAULT_IMAGE",
    "TestImageError",
    "ensure_test_image",
    "find_busybox",
    "image_exists",
    "rootfs_tar",
]
