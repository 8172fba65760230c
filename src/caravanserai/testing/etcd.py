"""A real single-member etcd server for tests and benchmarks.

    async with EtcdServer() as etcd:
        async with EtcdClient([etcd.endpoint]) as client:
            ...

- Runs the `etcd` binary (Debian package `etcd-server`) as a subprocess on free loopback ports, client and
  peer, with a temporary data directory and progress notifications every second
  (`--experimental-watch-progress-notify-interval=1s`), so idle watches show progress quickly.
- `start()` returns once `/health` answers true; a server that exits or stays unhealthy raises
  `EtcdStartError` with the tail of its log.
- `kill()` (SIGKILL) and `restart()` are for fault tests: a restart reuses the data directory and both ports,
  so clients reconnect to the same address and find every acknowledged write.
- `stop()` ends the process (SIGTERM, SIGKILL after a grace period) and removes the data directory.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import pathlib
import shutil
import signal
import ssl
import subprocess
import tempfile
from types import TracebackType
from typing import IO, Self

import structlog

from caravanserai.process.tls import TLSFiles
from caravanserai.testing.ports import free_port

log = structlog.get_logger(__name__)

_HEALTHY = b'"health":"true"'
_POLL_SECONDS = 0.05


class EtcdStartError(RuntimeError):
    """The etcd binary is missing, exited during startup, or never became healthy."""


async def endpoint_healthy(host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> bool:
    """Whether etcd's /health endpoint at host:port reports health (false on any connection problem)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=ssl_context), 5.0)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(f"GET /health HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        body = await asyncio.wait_for(reader.read(), timeout=2.0)
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return _HEALTHY in body


# Servers with a live process. A test run that ends without tearing its fixtures down (an interrupt, a
# crash) kills them at interpreter exit; the process also shares the test run's process group, so a
# signal sent to the whole group (Ctrl-C, `timeout`) reaches it.
_RUNNING: set[EtcdServer] = set()


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_RUNNING):
        server.kill()
        if server._workdir is not None:
            shutil.rmtree(server._workdir, ignore_errors=True)


class EtcdServer:
    """One etcd process owned by a test; see the module docstring."""

    def __init__(
        self,
        *,
        binary: str = "etcd",
        name: str = "caravanserai-test",
        startup_timeout: float = 20.0,
        stop_timeout: float = 10.0,
        extra_args: tuple[str, ...] = (),
        tls: TLSFiles | None = None,
    ) -> None:
        self._tls = tls  # serve clients over https with this certificate, requiring client certificates
        self._binary = binary
        self._name = name
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._extra_args = extra_args
        self._client_port = 0  # chosen on first start, kept across restarts
        self._peer_port = 0
        self._workdir: pathlib.Path | None = None  # holds data/ and etcd.log; removed by stop()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The client URL, e.g. `http://127.0.0.1:41234`."""
        if not self._client_port:
            raise RuntimeError("etcd server not started")
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self._client_port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def data_dir(self) -> pathlib.Path:
        if self._workdir is None:
            raise RuntimeError("etcd server not started")
        return self._workdir / "data"

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Pick ports and a data directory (first time only), launch etcd and wait until it is healthy."""
        if self.running:
            return
        executable = shutil.which(self._binary)
        if executable is None:
            raise EtcdStartError(
                f"etcd binary {self._binary!r} not found on PATH; install the Debian package etcd-server "
                "(apt-get install etcd-server)"
            )
        if self._workdir is None:
            self._workdir = pathlib.Path(tempfile.mkdtemp(prefix="caravanserai-etcd-"))
            self._client_port, self._peer_port = free_port(), free_port()
        self._spawn(executable)
        await self._wait_healthy()
        log.info("etcd started", endpoint=self.endpoint, pid=self._pid())

    def _command(self, executable: str) -> list[str]:
        client = self.endpoint
        peer = f"http://127.0.0.1:{self._peer_port}"
        tls_args = []
        if self._tls is not None:
            tls_args = [
                f"--cert-file={self._tls.cert}",
                f"--key-file={self._tls.key}",
                f"--trusted-ca-file={self._tls.ca}",
                "--client-cert-auth",
            ]
        return [
            executable,
            f"--name={self._name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={self._name}={peer}",
            "--initial-cluster-state=new",
            "--experimental-watch-progress-notify-interval=1s",
            "--logger=zap",
            "--log-level=warn",
            *tls_args,
            *self._extra_args,
        ]

    def _spawn(self, executable: str) -> None:
        assert self._workdir is not None
        self._log_file = open(self._workdir / "etcd.log", "ab")  # noqa: SIM115 - closed in _reap()
        self._proc = subprocess.Popen(
            self._command(executable),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        _RUNNING.add(self)

    async def _wait_healthy(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._startup_timeout
        while loop.time() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                self._reap()
                raise EtcdStartError(f"etcd exited during startup (code {code}):\n{self.log_tail()}")
            if await endpoint_healthy("127.0.0.1", self._client_port, self._ssl_context()):
                return
            await asyncio.sleep(_POLL_SECONDS)
        self.kill()
        raise EtcdStartError(f"etcd not healthy after {self._startup_timeout}s:\n{self.log_tail()}")

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self._tls is None:
            return None
        context = ssl.create_default_context(cafile=self._tls.ca)
        context.load_cert_chain(self._tls.cert, self._tls.key)
        return context

    def log_tail(self, lines: int = 20) -> str:
        """The last lines etcd wrote to its log (empty before the first start)."""
        if self._workdir is None or not (self._workdir / "etcd.log").exists():
            return ""
        text = (self._workdir / "etcd.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def kill(self) -> None:
        """SIGKILL the process at once (no clean shutdown); data and ports stay for `restart()`."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()
        self._reap()

    async def _terminate(self) -> None:
        """SIGTERM, wait up to stop_timeout, then SIGKILL."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._stop_timeout
            while proc.poll() is None and loop.time() < deadline:
                await asyncio.sleep(_POLL_SECONDS)
        self.kill()

    def _reap(self) -> None:
        _RUNNING.discard(self)
        self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    async def restart(self) -> None:
        """Stop the process if it runs (SIGTERM) and start it again on the same data directory and ports."""
        await self._terminate()
        await self.start()

    async def stop(self) -> None:
        """Stop the process (SIGTERM) and delete the data directory. The server can be started afresh."""
        await self._terminate()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
            self._client_port = self._peer_port = 0


__all__ = ["EtcdServer", "EtcdStartError", "endpoint_healthy"]
