"""Docker's exec API behind the agent's Docker boundary: run a command in a container, attached.

    async with execapi.attach(runtime, container_id, ExecOptions(command=("sh", "-c", "echo hi"))) as session:
        while (chunk := await session.read()) is not None:
            ...
        code = await session.exit_code()

Guarantees:

* `read()` returns `ExecChunk`s (stream "stdout" or "stderr"; with a TTY everything is "stdout") in the order
  Docker sends them, then None once the command's output has ended.
* `write()` feeds the command's stdin (only when opened with `stdin=True`); `close_stdin()` ends it (the command
  reads EOF) while output keeps flowing.
* With a TTY the initial size is set right after the command starts (as `docker exec -t` does; the engine's exec
  API before 1.42 takes no size at creation), so a command that reads its size at once may still see 0×0.
* `exit_code()` waits (briefly) until Docker reports the command finished and returns its code.
* `run_command` runs a command to its end (no stdin, no TTY) and returns its exit code with the last
  `OUTPUT_TAIL` bytes of its output (stdout and stderr interleaved); a caller that gives up on it (timeout,
  cancellation) closes the attachment, and the command itself runs on in the container until it ends.
* aiodocker and aiohttp errors leave as `DockerError`s (`calls.docker_call`); leaving the block closes the
  attachment (the command itself is not killed by Docker; it sees its stdin and output closed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiodocker.execs
import aiodocker.stream

from caravanserai.agent.docker import records
from caravanserai.agent.docker.calls import DockerError, docker_call
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.docker.records import ExecChunk, ExecOptions

OUTPUT_TAIL = 4096
EXIT_POLL = 0.02
EXIT_WAIT = 5.0
STREAM_NAMES = {1: "stdout", 2: "stderr"}


@dataclass(slots=True)
class ExecSession:
    """One attached exec instance; see the module docstring."""

    _exec: aiodocker.execs.Exec
    _stream: aiodocker.stream.Stream
    _stdin_open: bool

    async def read(self) -> ExecChunk | None:
        async with docker_call("read exec output"):
            message = await self._stream.read_out()
        if message is None:
            return None
        return ExecChunk(STREAM_NAMES.get(message.stream, "stdout"), bytes(message.data))

    async def write(self, data: bytes) -> None:
        if self._stdin_open and data:
            async with docker_call("write exec input"):
                await self._stream.write_in(data)

    async def close_stdin(self) -> None:
        """Half-close the attachment: the command reads EOF; its output still arrives."""
        if not self._stdin_open:
            return
        self._stdin_open = False
        response = self._stream._resp  # noqa: SLF001 - aiodocker closes both directions in Stream.close()
        transport = response.connection.transport if response is not None and response.connection else None
        if transport is not None and transport.can_write_eof():
            transport.write_eof()

    async def resize(self, *, width: int, height: int) -> None:
        if width and height:
            async with docker_call("resize exec terminal"):
                await self._exec.resize(w=width, h=height)

    async def exit_code(self) -> int:
        """The command's exit code, once Docker reports it finished (-1 if it still runs after a few seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + EXIT_WAIT
        while True:
            async with docker_call("inspect exec"):
                state = records.exec_state(await self._exec.inspect())
            if not state.running or loop.time() > deadline:
                return state.exit_code if state.exit_code is not None and not state.running else -1
            await asyncio.sleep(EXIT_POLL)


@contextlib.asynccontextmanager
async def attach(runtime: DockerRuntime, container_id: str, options: ExecOptions) -> AsyncIterator[ExecSession]:
    """Create and start an exec instance of `options` in the container, attached; closed on exit."""
    container = runtime.streams.containers.container(container_id)
    async with docker_call(f"exec in container {container_id[:12]}"):
        instance = await container.exec(
            list(options.command),
            stdout=True,
            stderr=True,
            stdin=options.stdin,
            tty=options.tty,
            environment=list(options.env) or None,
            workdir=options.workdir or None,
        )
        stream = instance.start(detach=False)
        await stream.__aenter__()
    try:
        session = ExecSession(instance, stream, options.stdin)
        if options.tty:
            with contextlib.suppress(DockerError):  # a command that ended at once has no terminal to resize
                await session.resize(width=options.width, height=options.height)
        yield session
    finally:
        await stream.close()


@dataclass(frozen=True, slots=True)
class ExecResult:
    """How a command run with `run_command` ended: its exit code (-1: unknown) and the tail of its output."""

    exit_code: int
    output: bytes


async def run_command(runtime: DockerRuntime, container_id: str, command: tuple[str, ...]) -> ExecResult:
    """Run `command` in the container until it ends; its exit code and the last `OUTPUT_TAIL` bytes it wrote."""
    tail = b""
    async with attach(runtime, container_id, ExecOptions(command=command)) as session:
        while (chunk := await session.read()) is not None:
            tail = (tail + chunk.data)[-OUTPUT_TAIL:]
        return ExecResult(await session.exit_code(), tail)


__all__ = ["ExecResult", "ExecSession", "OUTPUT_TAIL", "attach", "run_command"]
