"""`caractrl exec` and `caractrl port-forward` as real processes, through a real agent, into real containers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agent_harness import StartAgent, bind, wait_phase

from caravanserai import v1
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.client import Client
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project

pytestmark = pytest.mark.docker

ECHO_PORT = 7000
# A web server on 8080 (one process per connection) and a TCP echo server (`cat` per connection; busybox nc is
# reliable for connections one after the other only).
SERVE = f"echo hello > /tmp/index.html; httpd -p 8080 -h /tmp; exec nc -ll -p {ECHO_PORT} -e cat"


async def caractrl(api: RunningApiServer, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run caractrl; (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caravanserai.cli",
        "--server",
        api.address,
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def hello(client: Client, start_agent: StartAgent, image: str) -> str:
    """Project `hello` (service `web`) Running on a fresh agent; returns the project name."""
    agent = await start_agent()
    await client.projects.create(project("hello", image=image, services=["web"], command=["sh", "-c", SERVE]))
    await bind(client, "hello", agent.node)
    await wait_phase(client, "hello", v1.RUNNING)
    return "hello"


async def test_exec_prints_output_and_exits_with_the_code(api: RunningApiServer, hello: str) -> None:
    code, out, err = await caractrl(api, "exec", "hello/web", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3")
    assert (code, out, err) == (3, "hi\n", "oops\n")
    code, out, _ = await caractrl(
        api,
        "exec",
        "-e",
        "GREETING=hey there",
        "-w",
        "/tmp",
        "hello/web",
        "--",
        "sh",
        "-c",
        'echo "$GREETING from $(pwd)"',
    )
    assert (code, out) == (0, "hey there from /tmp\n")


async def test_exec_with_a_terminal(api: RunningApiServer, hello: str) -> None:
    code, out, err = await caractrl(
        api, "exec", "-t", "hello/web", "--", "sh", "-c", "test -t 1 && echo on a tty; exit 4"
    )
    assert (code, out, err) == (4, "on a tty\r\n", "")  # the terminal's line discipline: \n becomes \r\n
    code, out, _ = await caractrl(api, "exec", "hello/web", "--", "sh", "-c", "test -t 1 || echo no tty")
    assert (code, out) == (0, "no tty\n")


async def test_exec_terminal_size_and_resize(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    await client.projects.create(project("sized", image=image, services=["web"]))
    await bind(client, "sized", agent.node)
    await wait_phase(client, "sized", v1.RUNNING)
    # The initial size is set just after the command starts (as `docker exec -t` does): the script waits a little.
    script = "sleep 0.5; busybox stty size; read line; busybox stty size"  # the second size after the resize

    async def requests() -> AsyncIterator[api_pb2.ExecRequest]:
        size = api_pb2.TerminalSize(width=100, height=30)
        start = api_pb2.ExecStart(
            project="sized", service="web", command=["sh", "-c", script], stdin=True, tty=True, size=size
        )
        yield api_pb2.ExecRequest(start=start)
        await asyncio.sleep(1)
        yield api_pb2.ExecRequest(resize=api_pb2.TerminalSize(width=120, height=40))
        await asyncio.sleep(0.5)
        yield api_pb2.ExecRequest(stdin=b"go\n")
        await finished.wait()  # a terminal's stdin stays open (ending it hangs the terminal up)

    finished = asyncio.Event()

    responses = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{agent.agent.port}") as channel:
        async for response in api_pb2_grpc.AgentStub(channel).Exec(requests(), timeout=30):
            responses.append(response)
            if response.WhichOneof("response") == "exit_code":
                finished.set()
    output = b"".join(r.stdout for r in responses)
    assert output.split(b"\r\n")[0] == b"30 100" and b"40 120" in output, output
    assert responses[-1].WhichOneof("response") == "exit_code" and responses[-1].exit_code == 0


async def test_exec_pipes_stdin(api: RunningApiServer, hello: str) -> None:
    data = b"".join(b"line %d\n" % i for i in range(2000))  # larger than one chunk
    code, out, _ = await caractrl(api, "exec", "-i", "hello/web", "--", "sh", "-c", "cat; echo done", stdin=data)
    assert code == 0 and out.encode() == data + b"done\n"


async def test_exec_and_forward_refusals(api: RunningApiServer, client: Client, hello: str, image: str) -> None:
    code, _, err = await caractrl(api, "exec", "hello/nope", "--", "true")
    assert code == 1 and err.strip() == 'error: project "hello" has no service "nope" (services: web)'
    await client.projects.create(project("waiting", image=image, services=["web"]))
    code, _, err = await caractrl(api, "port-forward", "waiting/web", "80")
    assert code == 1 and err.strip().startswith('error: project "waiting" is not Running (phase Pending)')
    code, out, _ = await caractrl(api, "exec", "hello/web", "--", "/no/such/program")
    assert code in (126, 127) and "/no/such/program" in out  # Docker's exit code and its complaint, passed on
    code, _, err = await caractrl(api, "port-forward", "hello/web", "99999")
    assert code == 1 and "invalid remote port" in err


@contextlib.asynccontextmanager
async def port_forward(
    api: RunningApiServer, *args: str, token: str = ""
) -> AsyncIterator[tuple[int, asyncio.subprocess.Process]]:
    """A running `caractrl port-forward`; yields the local port it printed and the process."""
    auth = ("--token", token) if token else ()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caravanserai.cli",
        "--server",
        api.address,
        *auth,
        "port-forward",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        assert line.startswith("Forwarding from 127.0.0.1:"), line + (await proc.stderr.read()).decode()  # type: ignore[union-attr]  # the process is started with stderr piped
        yield int(line.split()[2].rsplit(":", 1)[1]), proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def echo_once(port: int, payload: bytes) -> bytes:
    """Send `payload`, half-close, read everything back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    await writer.drain()
    writer.write_eof()  # the echo server's `cat` ends on EOF: the half-close must reach the container
    data = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    return data


async def http_get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    await writer.drain()
    response = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    return response


async def test_port_forward_many_connections_and_an_abort(api: RunningApiServer, hello: str) -> None:
    async with port_forward(api, "hello/web", ":8080") as (port, proc):
        responses = await asyncio.gather(*(http_get(port, "/index.html") for _ in range(20)))
        assert all(r.startswith(b"HTTP/1.") and r.endswith(b"\r\n\r\nhello\n") for r in responses), responses

        _, writer = await asyncio.open_connection("127.0.0.1", port)  # one connection aborted midway
        writer.write(b"GET /index")
        await writer.drain()
        writer.transport.abort()
        assert (await http_get(port, "/index.html")).endswith(b"hello\n")
        assert proc.returncode is None


async def test_port_forward_honours_half_close(api: RunningApiServer, hello: str) -> None:
    async with port_forward(api, "hello/web", f":{ECHO_PORT}") as (port, _):
        for size in (1, 100_000, 1_000_000):  # the echo server's `cat` answers everything, then ends on EOF
            payload = os.urandom(size)
            assert await echo_once(port, payload) == payload


async def test_port_forward_to_a_closed_port_says_so(api: RunningApiServer, hello: str) -> None:
    async with port_forward(api, "hello/web", ":9") as (port, proc):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), 20) == b""  # closed at once
        writer.close()
        assert proc.stderr is not None

        async def complaint() -> bytes:
            return await proc.stderr.readline()  # type: ignore[union-attr]  # asserted not None above; the closure does not keep the narrowing

        line = (await asyncio.wait_for(complaint(), 10)).decode()
        assert "hello/web:9 refused the connection" in line and "connection from 127.0.0.1:" in line
        assert await echo_once(port, b"") == b""  # the listener still accepts
        assert proc.returncode is None


async def test_only_admin_and_roles_may_exec_and_forward(
    api: RunningApiServer, client: Client, start_agent: StartAgent, image: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("admin-secret,alice,admin\nview-secret,viewer\n")
    agent = await start_agent(token_file=str(tokens))
    await client.projects.create(project("guarded", image=image, services=["web"], command=["sh", "-c", SERVE]))
    await bind(client, "guarded", agent.node)
    await wait_phase(client, "guarded", v1.RUNNING)

    code, out, _ = await caractrl(api, "--token", "admin-secret", "exec", "guarded/web", "--", "echo", "ok")
    assert (code, out) == (0, "ok\n")  # a token mapped to the admin group
    code, _, err = await caractrl(api, "--token", "view-secret", "exec", "guarded/web", "--", "echo", "ok")
    assert code == 1 and err.strip() == (
        f"error: the agent of node/{agent.node} refused: viewer may not exec into project default/guarded: "
        "no role bound to viewer allows create projects/exec in namespace default"
    )
    code, _, err = await caractrl(api, "exec", "guarded/web", "--", "echo", "ok")  # no token at all
    assert code == 1 and "refused: no client certificate or bearer token" in err
    async with port_forward(api, "guarded/web", ":8080", token="view-secret") as (port, proc):
        assert await http_get(port, "/index.html") == b""  # closed without a byte
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 10)).decode()
        assert "viewer may not port-forward" in line


async def test_port_forward_exits_cleanly_on_sigterm(api: RunningApiServer, hello: str) -> None:
    async with port_forward(api, "hello/web", f":{ECHO_PORT}") as (port, proc):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # a stream open at the signal
        writer.write(b"ping\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.readline(), 20) == b"ping\n"
        proc.terminate()
        assert await asyncio.wait_for(reader.read(), 20) == b""  # the open connection is closed
        writer.close()
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
        assert "Traceback" not in err and err == "", err
