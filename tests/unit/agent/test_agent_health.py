"""The agent's http/tcp health checks: Docker's HEALTHCHECK semantics on a fake clock, and real probes against
servers on loopback."""

from __future__ import annotations

import asyncio

from caravanserai import v1
from caravanserai.agent.workload.health import HealthProber, probe_once
from caravanserai.testing.clock import FakeClock


def check(**settings: object) -> v1.HealthCheck:
    return v1.HealthCheck(tcp=v1.TcpCheck(port=1), **settings)  # type: ignore[arg-type]  # settings are HealthCheck fields, typed object here


async def test_status_follows_probes_with_retries_and_start_period() -> None:
    clock = FakeClock()
    outcomes: list[bool] = []
    changed: list[str] = []

    async def probe(c: v1.HealthCheck, address: str, timeout: float) -> bool:
        return outcomes.pop(0)

    prober = HealthProber(clock=clock, on_change=changed.append, probe=probe)
    prober.track(
        "p", "web", container_id="c1", address="10.0.0.2", check=check(interval="1s", retries=2, start_period="2s")
    )
    assert prober.status("c1") == "starting"
    for passed, expected in (
        (False, "starting"),
        (False, "starting"),
        (False, "starting"),
        (False, "unhealthy"),
        (True, "healthy"),
        (False, "healthy"),
        (False, "unhealthy"),
    ):
        outcomes.append(passed)
        await prober.probe_due()
        assert prober.status("c1") == expected
        clock.advance(1.0)
    assert changed == ["p", "p", "p"]
    prober.track("p", "web", container_id="c2", address="10.0.0.3", check=check())  # recreated: starts over
    assert (prober.status("c1"), prober.status("c2")) == ("", "starting")
    prober.forget_except("p", ())
    assert prober.status("c2") == ""


async def test_real_tcp_and_http_probes_on_loopback() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readline()
        code = 204 if b"/ok" in request else 500
        writer.write(f"HTTP/1.0 {code} X\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await probe_once(v1.HealthCheck(tcp=v1.TcpCheck(port=port)), "127.0.0.1", 1.0)
        ok = v1.HealthCheck(http=v1.HttpCheck(path="/ok", port=port))
        assert await probe_once(ok, "127.0.0.1", 1.0)
        bad = v1.HealthCheck(http=v1.HttpCheck(path="/bad", port=port))
        assert not await probe_once(bad, "127.0.0.1", 1.0)
        strict = v1.HealthCheck(http=v1.HttpCheck(path="/ok", port=port, expected_status="200"))
        assert not await probe_once(strict, "127.0.0.1", 1.0)
    finally:
        server.close()
        await server.wait_closed()
    assert not await probe_once(v1.HealthCheck(tcp=v1.TcpCheck(port=port)), "127.0.0.1", 1.0)
