"""Real restic repositories for tests and benchmarks: a REST server on loopback and local-path repositories.

    async with RestServer() as server:                     # `rclone serve restic` on 127.0.0.1:<free port>
        repository = ResticRepository(server.url, "pw")     # rest:http://127.0.0.1:PORT/repo/
        await repository.init()
        await repository.run("backup", ".", cwd=data_dir)
        [snapshot] = await repository.snapshots()

    repository = ResticRepository(local_repository_url(tmp_path / "repo"), "pw")

Guarantees:

* **Loopback only.** `RestServer` listens on `127.0.0.1` and nowhere else; there is no option to change that.
* **Started means answering.** `start()` (and `async with`) returns once the server answers HTTP; an `rclone` that
  is missing, exits or never answers raises `RestServerStartError` with the tail of its log.
* **Always stopped.** Leaving the `async with` block (also on an exception or a cancellation) stops the process
  with `stop_process` (SIGTERM, then SIGKILL after `stop_timeout`) and waits until it is gone; servers still
  running when the interpreter exits are killed then. The server's temporary directory (its log, and the
  repositories when no `root` was given) is removed; a caller's `root` is left to the caller.
* **Passwords stay out of argv.** `ResticRepository` hands the password to restic as `RESTIC_PASSWORD` in the
  environment (inherited `RESTIC_*` variables are dropped so they cannot interfere); a failed command raises
  `ResticError` with restic's own message and the subcommand, never the password.

Paths: `rclone serve restic` (1.60) serves every repository below its root directory, one per path: `url` is
`rest:http://127.0.0.1:PORT/<name>/` (the name given to the server, default `repo`), and `repository_url(name)`
names another repository on the same server. restic 0.14 initialises and uses such URLs with or without the
trailing slash; the server creates the repository's directory at `restic init`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import pathlib
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any, Self

import structlog

from caravanserai.process.subprocesses import stop_process
from caravanserai.testing.ports import free_port

log = structlog.get_logger(__name__)

LOOPBACK = "127.0.0.1"
_POLL_SECONDS = 0.05


class RestServerStartError(RuntimeError):
    """The rclone binary is missing, exited during start-up, or never answered."""


class ResticError(RuntimeError):
    """A restic command failed; the message is restic's own (its last lines of stderr)."""


def local_repository_url(directory: pathlib.Path | str) -> str:
    """The restic URL of a local-path repository in `directory`: its absolute path (restic needs no prefix)."""
    return str(pathlib.Path(directory).resolve())


# Servers with a live process; killed at interpreter exit if a test run ends without tearing its fixtures down.
_RUNNING: set[RestServer] = set()


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_RUNNING):
        server._kill_now()


class RestServer:
    """One `rclone serve restic` process on loopback, owned by a test; see the module docstring."""

    def __init__(
        self,
        root: pathlib.Path | None = None,
        *,
        name: str = "repo",
        binary: str = "rclone",
        startup_timeout: float = 20.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self._root = root  # the caller's directory of repositories, or None: one in the temporary directory
        self._name = name
        self._binary = binary
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._port = 0
        self._workdir: pathlib.Path | None = None  # holds rclone.log (and repos/ when no root was given)
        self._proc: asyncio.subprocess.Process | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("rest server not started")
        return self._port

    @property
    def address(self) -> str:
        """`127.0.0.1:PORT`."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        """The restic URL of the server's repository: `rest:http://127.0.0.1:PORT/<name>/`."""
        return self.repository_url(self._name)

    def repository_url(self, name: str) -> str:
        """The restic URL of the repository `name` on this server (it exists once `restic init` made it)."""
        if not name or "/" in name:
            raise ValueError(f"repository name {name!r}: one non-empty path segment expected")
        return f"rest:http://{self.address}/{name}/"

    @property
    def root(self) -> pathlib.Path:
        """The directory holding the served repositories (one subdirectory per repository)."""
        if self._root is not None:
            return self._root
        if self._workdir is None:
            raise RuntimeError("rest server not started")
        return self._workdir / "repos"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Launch rclone on a free loopback port and wait until it answers; stopped again if it does not."""
        if self.running:
            return
        executable = shutil.which(self._binary)
        if executable is None:
            raise RestServerStartError(
                f"rclone binary {self._binary!r} not found on PATH; install the Debian package rclone"
            )
        if self._workdir is None:
            self._workdir = pathlib.Path(tempfile.mkdtemp(prefix="caravanserai-restic-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._port = free_port(host=LOOPBACK)
        try:
            await self._spawn(executable)
            await self._wait_answering()
        except BaseException:
            await self.stop()
            raise
        log.info("rest server started", url=self.url, pid=self.pid)

    def _command(self, executable: str) -> list[str]:
        # --config "": rclone keeps its (empty) configuration in memory and reads no file of the user's.
        return [executable, "serve", "restic", "--config", "", "--addr", self.address, str(self.root)]

    async def _spawn(self, executable: str) -> None:
        assert self._workdir is not None
        self._log_file = open(self._workdir / "rclone.log", "ab")  # noqa: SIM115 - closed in _reap()
        self._proc = await asyncio.create_subprocess_exec(
            *self._command(executable),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=self._log_file,
        )
        _RUNNING.add(self)

    async def _wait_answering(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._startup_timeout
        while loop.time() < deadline:
            if self._proc is None or self._proc.returncode is not None:
                code = None if self._proc is None else self._proc.returncode
                raise RestServerStartError(f"rclone exited during start-up (code {code}):\n{self.log_tail()}")
            if await answers_http(LOOPBACK, self._port):
                return
            await asyncio.sleep(_POLL_SECONDS)
        raise RestServerStartError(f"rclone not answering after {self._startup_timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines rclone wrote to its log (empty before the first start and after stop)."""
        if self._workdir is None or not (self._workdir / "rclone.log").exists():
            return ""
        text = (self._workdir / "rclone.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    async def stop(self) -> None:
        """Stop the process (SIGTERM, SIGKILL after `stop_timeout`), wait until it is gone, remove the temporary
        directory. Safe to call twice, and on a server that never started."""
        try:
            await stop_process(self._proc, grace=self._stop_timeout)
        finally:
            self._reap()
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
            self._port = 0

    def _kill_now(self) -> None:
        """SIGKILL without waiting (interpreter exit, no event loop to wait in)."""
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, signal.SIGKILL)
        self._reap()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def _reap(self) -> None:
        _RUNNING.discard(self)
        self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


async def answers_http(host: str, port: int) -> bool:
    """Whether something at host:port answers an HTTP request with a status line (false on connection trouble)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5.0)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(f"HEAD /config HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.read(16), timeout=2.0)
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return head.startswith(b"HTTP/")


def restic_environment(password: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a restic command: ours without inherited `RESTIC_*` variables, plus
    `RESTIC_PASSWORD` and `extra` (backend credentials such as `RESTIC_REST_USERNAME`)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RESTIC_")}
    env["RESTIC_PASSWORD"] = password
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class ResticRepository:
    """A restic repository a test talks to: its URL and its password (given to restic in the environment only).

    `no_cache` (default true) keeps restic's cache out of the user's home directory; a benchmark that wants the
    cache a real agent would have sets it false."""

    url: str
    password: str = field(repr=False)
    binary: str = "restic"
    no_cache: bool = True
    env: dict[str, str] = field(default_factory=dict, repr=False)

    async def run(self, *args: str, cwd: pathlib.Path | str | None = None) -> bytes:
        """`restic -r URL ARGS...`; its standard output. Raises `ResticError` with restic's message on failure."""
        executable = shutil.which(self.binary)
        if executable is None:
            raise ResticError(f"restic binary {self.binary!r} not found on PATH; install the Debian package restic")
        cache = ["--no-cache"] if self.no_cache else []
        proc = await asyncio.create_subprocess_exec(
            executable,
            "-r",
            self.url,
            *cache,
            *args,
            cwd=cwd,
            env=restic_environment(self.password, self.env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await proc.communicate()
        finally:
            await stop_process(proc, grace=5.0)  # only when cancelled: communicate() reaped it otherwise
        if proc.returncode != 0:
            reason = " ".join(err.decode(errors="replace").strip().splitlines()[-3:]) or f"exit {proc.returncode}"
            raise ResticError(f"restic {args[0] if args else ''} on {self.url} failed: {reason}")
        return out

    async def init(self) -> None:
        """`restic init`: create the repository (an existing one makes this fail)."""
        await self.run("init")

    async def snapshots(self, *tags: str) -> list[dict[str, Any]]:
        """The repository's snapshots as `restic snapshots --json` lists them, oldest first; with `tags`, only
        those carrying all of them (e.g. `snapshots("project=<uid>", "volume=data")`)."""
        selection = ["--tag", ",".join(tags)] if tags else []
        listed = json.loads(await self.run("snapshots", "--json", *selection))
        if not isinstance(listed, list):
            raise ResticError(f"restic snapshots on {self.url}: a JSON list expected, got {type(listed).__name__}")
        return listed

    async def backup(self, directory: pathlib.Path | str, *tags: str, host: str = "test") -> dict[str, Any]:
        """Back `directory` up as the snapshot's root (restic runs in it on path `.`), with `host` and `tags`;
        restic's JSON summary (`snapshot_id`, `data_added`, `total_bytes_processed`, ...)."""
        tag_args = [arg for tag in tags for arg in ("--tag", tag)]
        out = await self.run("backup", "--json", "--host", host, *tag_args, ".", cwd=directory)
        for line in reversed(out.decode().splitlines()):
            message = json.loads(line)
            if isinstance(message, dict) and message.get("message_type") == "summary":
                return message
        raise ResticError(f"restic backup on {self.url}: no summary in its output")

    async def restore(self, snapshot: str, target: pathlib.Path | str) -> None:
        """Restore `snapshot` (an id, or `latest`) so that its files land directly in `target`."""
        await self.run("restore", snapshot, "--target", str(target))


__all__ = [
    "LOOPBACK",
    "RestServer",
    "RestServerStartError",
    "ResticError",
    "ResticRepository",
    "answers_http",
    "local_repository_url",
    "restic_environment",
]
