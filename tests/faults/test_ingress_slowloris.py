"""A slowloris against a real cara-agent process: 20,000 half-sent requests from twenty addresses, the size of
the report. The connection limits refuse the excess at once, the ingress keeps serving other clients, the agent's
/healthz keeps answering and its log does not grow per connection.

This process holds every client socket, so it raises its own open-file limit for the attack (root may raise the
hard limit too); where that is not allowed the attack is as large as the limit permits and says so. The header
timeout is raised for the test so that the held connections stay held while it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from fault_processes import OsProcess, Processes

from caravanserai.testing import free_port
from support.processes import ApiProcess

ATTACKERS = [f"127.0.0.{n}" for n in range(10, 30)]  # twenty addresses
PER_ATTACKER = 1000  # 20,000 connections in all
OWN_FILES = 1024  # kept for this process's other files (the pytest run, its logs, aiohttp)
PER_CLIENT = 200
HEAD = b"GET / HTTP/1.1\r\nHost: nothing.here.local\r\nX-Slow: "  # never finished
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def agent_argv(server: str, node: str, ingress: int, health: int) -> list[str]:
    return [
        sys.executable, "-m", "caravanserai.agent",
        "--server", server,
        "--node-name", node,
        "--listen", "127.0.0.1:0",
        "--ingress-listen", f"127.0.0.1:{ingress}",
        "--health-listen", f"127.0.0.1:{health}",
        "--network-pool", "0",
        "--ingress-header-timeout", "5m",  # held connections stay held while the test measures
        "--ingress-keepalive-timeout", "5m",
        "--ingress-max-connections-per-client", str(PER_CLIENT),
        "--log-level", "info",
    ]  # fmt: skip


async def get(url: str, *, source: str = "127.0.0.1", host: str = "") -> tuple[int, float]:
    """(status, seconds) of one GET; status 0 when nothing answered within 5 s."""
    started = time.monotonic()
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    headers = {"Host": host} if host else {}
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=5)) as s,
            s.get(url, headers=headers) as r,
        ):
            await r.read()
            return r.status, time.monotonic() - started
    except (aiohttp.ClientError, TimeoutError):
        return 0, time.monotonic() - started


async def open_slow(port: int, source: str) -> Connection | None:
    """A connection that sent part of a head and nothing more; None when the connect itself failed."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError:
        return None
    writer.write(HEAD)
    return reader, writer


async def refused_at_once(connection: Connection) -> bool:
    """Whether the ingress answered 503 and closed the connection within a second."""
    try:
        answer = await asyncio.wait_for(connection[0].read(), 1.0)
    except TimeoutError:
        return False
    except OSError:
        return True  # reset: refused too
    return answer.startswith(b"HTTP/1.1 503") or answer == b""


def raise_file_limit(wanted: int) -> int:
    """Raise this process's open-file limit toward `wanted` (soft and, when allowed, hard); the limit reached."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))  # needs CAP_SYS_RESOURCE
        return wanted
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


@pytest.fixture
def per_attacker() -> Iterator[int]:
    """Connections each attacking address opens: PER_ATTACKER, or fewer when this process may not hold them."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = raise_file_limit(len(ATTACKERS) * PER_ATTACKER + OWN_FILES)
    count = min(PER_ATTACKER, (limit - OWN_FILES) // len(ATTACKERS))
    if count < PER_ATTACKER:
        sys.stderr.write(f"slowloris: {count * len(ATTACKERS)} connections, as many as the file limit allows\n")
    try:
        yield count
    finally:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, before)


async def wait_healthy(port: int) -> None:
    for _ in range(200):
        status, _ = await get(f"http://127.0.0.1:{port}/healthz")
        if status == 200:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the agent's /healthz never answered")


@pytest.mark.timeout(240)
async def test_a_slowloris_is_turned_away_and_everyone_else_is_served(
    api_process: ApiProcess, processes: Processes, docker_nodes: set[str], per_attacker: int
) -> None:
    node = "slowloris-node"
    docker_nodes.add(node)
    ingress, health = free_port(), free_port()
    agent: OsProcess = await processes.start("agent", agent_argv(api_process.address, node, ingress, health))
    await wait_healthy(health)
    assert (await get(f"http://127.0.0.1:{ingress}/", host="nothing.here.local"))[0] == 404
    log_before = Path(agent.log_path).stat().st_size

    connections: list[Connection] = []
    try:
        for source in ATTACKERS:
            opened = await asyncio.gather(*(open_slow(ingress, source) for _ in range(per_attacker)))
            connections += [c for c in opened if c is not None]
        assert len(connections) >= 0.95 * len(ATTACKERS) * per_attacker, "the attack could not even connect"
        refused = await asyncio.gather(*(refused_at_once(c) for c in connections))
        held = len(connections) - sum(refused)
        # Each attacking address holds at most its limit; the rest was answered 503 and closed within a second.
        assert held <= PER_CLIENT * len(ATTACKERS), f"{held} connections held"
        assert sum(refused) >= len(connections) - PER_CLIENT * len(ATTACKERS)

        # Meanwhile: another client is served at once, and so is the agent's health endpoint.
        status, took = await get(f"http://127.0.0.1:{ingress}/", source="127.0.0.3", host="nothing.here.local")
        assert status == 404 and took < 2.0, (status, took)
        status, took = await get(f"http://127.0.0.1:{health}/healthz")
        assert status == 200 and took < 2.0, (status, took)
        assert agent.running

        # The log grew by a few rate-limited lines, not by one per refused connection.
        grown = Path(agent.log_path).stat().st_size - log_before
        assert grown < 20_000, f"the agent's log grew by {grown} bytes during the attack"
    finally:
        for _, writer in connections:
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.gather(*(w.wait_closed() for _, w in connections), return_exceptions=True)
