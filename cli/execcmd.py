"""`caractrl exec PROJECT/SERVICE [-i] [-t] [-e K=V] [-w DIR] -- CMD [ARG…]`: run a command in a service's container.

    caractrl exec hello/web -- sh -c 'echo hi; exit 3'     # prints hi, exits 3
    echo data | caractrl exec -i hello/web -- cat
    caractrl exec -it hello/web -- sh                      # an interactive shell

The command runs through the agent of the project's node (`Agent.Exec`, Docker's exec API): stdout and stderr
arrive on caractrl's stdout and stderr as they are written; `-i` sends caractrl's stdin (its end is the
command's EOF); `-t` allocates a terminal: caractrl's terminal is put in raw mode for the duration and window
size changes are passed on. caractrl exits with the command's exit code. Only `admin` may exec.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import sys
import termios
import tty
from collections.abc import AsyncIterator, Iterator

import click
import grpc

from caravanserai.api.v1 import api_pb2
from caravanserai.cli.agents import AgentConnection, connect, find_project_node, split_target
from caravanserai.cli.common import pass_settings, run
from caravanserai.cli.config import Settings

CHUNK = 64 * 1024


def terminal_size() -> api_pb2.TerminalSize:
    """The size of caractrl's terminal (0×0 when stdout is not one)."""
    try:
        columns, lines = os.get_terminal_size(sys.stdout.fileno())
    except OSError:
        return api_pb2.TerminalSize()
    return api_pb2.TerminalSize(width=columns, height=lines)


async def read_chunks(fd: int) -> AsyncIterator[bytes]:
    """Chunks of `fd` until its end, without blocking the event loop (pipes and terminals are awaited; a regular
    file is read directly)."""
    loop = asyncio.get_running_loop()
    pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
    while True:
        if pollable:
            ready: asyncio.Future[None] = loop.create_future()

            def wake(ready: asyncio.Future[None] = ready) -> None:
                if not ready.done():
                    ready.set_result(None)

            try:
                loop.add_reader(fd, wake)
            except OSError:  # e.g. /dev/null: not pollable, and never blocks
                pollable = False
            else:
                try:
                    await ready
                finally:
                    loop.remove_reader(fd)
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return
        yield chunk


async def requests(
    start: api_pb2.ExecStart, resizes: asyncio.Queue[api_pb2.TerminalSize]
) -> AsyncIterator[api_pb2.ExecRequest]:
    """The start, then stdin (with `start.stdin`) and terminal resizes as they come."""
    yield api_pb2.ExecRequest(start=start)
    events: asyncio.Queue[api_pb2.ExecRequest | None] = asyncio.Queue()

    async def pump_stdin() -> None:
        async for chunk in read_chunks(sys.stdin.fileno()):
            await events.put(api_pb2.ExecRequest(stdin=chunk))
        await events.put(api_pb2.ExecRequest(stdin_eof=True))

    async def pump_resizes() -> None:
        while True:
            await events.put(api_pb2.ExecRequest(resize=await resizes.get()))

    tasks = [asyncio.create_task(pump_resizes())]
    if start.stdin:
        tasks.append(asyncio.create_task(pump_stdin()))
    try:
        while (request := await events.get()) is not None:
            yield request
    finally:
        for task in tasks:
            task.cancel()


@contextlib.contextmanager
def raw_terminal(enabled: bool) -> Iterator[None]:
    """caractrl's terminal in raw mode (when `enabled` and stdin is a terminal), restored on exit."""
    fd = sys.stdin.fileno()
    if not enabled or not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def run_exec(agent: AgentConnection, start: api_pb2.ExecStart) -> int:
    """Run the command, copy its output, return its exit code."""
    resizes: asyncio.Queue[api_pb2.TerminalSize] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    if start.tty:
        loop.add_signal_handler(signal.SIGWINCH, lambda: resizes.put_nowait(terminal_size()))
    call = agent.stub.Exec(requests(start, resizes), metadata=agent.metadata)
    code = -1
    try:
        async for response in call:
            kind = response.WhichOneof("response")
            if kind == "stdout":
                _write(sys.stdout.fileno(), response.stdout)
            elif kind == "stderr":
                _write(sys.stderr.fileno(), response.stderr)
            elif kind == "exit_code":
                code = response.exit_code
    except grpc.aio.AioRpcError as exc:
        raise agent.error(exc) from exc
    finally:
        if start.tty:
            loop.remove_signal_handler(signal.SIGWINCH)
    return code


async def _exec(settings: Settings, start: api_pb2.ExecStart) -> int:
    project, node = await find_project_node(settings, start.project, start.service)
    start.namespace = project.metadata.namespace  # the agent finds the container by namespace and name
    async with connect(settings, node) as agent:
        with raw_terminal(start.tty and start.stdin):
            return await run_exec(agent, start)


def _env(values: tuple[str, ...]) -> list[str]:
    for value in values:
        key, sep, _ = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint="'-e' / '--env'")
    return list(values)


@click.command("exec", context_settings={"ignore_unknown_options": False})
@click.argument("target", metavar="PROJECT/SERVICE")
@click.argument("command", nargs=-1, required=True, metavar="-- CMD [ARG]...")
@click.option("-i", "--stdin", "interactive", is_flag=True, help="Pass stdin to the command.")
@click.option("-t", "--tty", "use_tty", is_flag=True, help="Allocate a terminal (raw mode, window size).")
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Set an environment variable (repeatable).")
@click.option("-w", "--workdir", default="", metavar="DIR", help="Working directory inside the container.")
@pass_settings
@click.pass_context
def exec_command(
    ctx: click.Context,
    settings: Settings,
    target: str,
    command: tuple[str, ...],
    interactive: bool,
    use_tty: bool,
    env: tuple[str, ...],
    workdir: str,
) -> None:
    """Run a command in a service's container; exit with its exit code."""
    project, service = split_target(target)
    start = api_pb2.ExecStart(
        project=project,
        service=service,
        command=list(command),
        env=_env(env),
        workdir=workdir,
        stdin=interactive,
        tty=use_tty,
        size=terminal_size() if use_tty else None,
    )
    sys.stdout.flush()
    ctx.exit(run(_exec(settings, start)))


exec_command.fixed_resource = "projects"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute

__all__ = ["exec_command", "read_chunks", "terminal_size"]
