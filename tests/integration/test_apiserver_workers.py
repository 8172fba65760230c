"""`cara-apiserver --workers 2` as a real process over a real etcd: both workers serve one address and agree
through etcd (a write through either is seen by watches on the other, a watch resumes on the other worker from a
version, a kind defined through one is served at once by the other), the supervisor's endpoint covers both,
a killed worker is restarted, SIGTERM leaves no process behind, and a bad worker count is one line; and, in
process, an apiserver that has not followed a stored definition yet waits for it instead of refusing the kind."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from caravanserai import meta, v1
from caravanserai.apiserver.grpcapi import WORKER_METADATA
from caravanserai.client import Client
from caravanserai.testing import free_port
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for
from support.customkinds import define_webfarm, webfarm, webfarm_messages

CONNECTIONS = 16  # clients with connections of their own opened until both workers hold one (fails: 2^-15)


def _children(pid: int) -> list[int]:
    """Live processes whose parent is `pid`."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def _watch(client: Client, resource_version: str) -> tuple[int, Any]:
    """A Watch of projects on `client`'s connection from `resource_version`: (serving worker, the call)."""
    call = client.stub.Watch(v1.WatchRequest(resource="projects", resource_version=resource_version))
    metadata = dict(await call.initial_metadata())
    return int(metadata[WORKER_METADATA]), call


async def _names(call: Any, count: int) -> list[tuple[str, str]]:
    """(type, name) of the next `count` events of a raw Watch call."""
    seen: list[tuple[str, str]] = []
    while len(seen) < count:
        event = await asyncio.wait_for(call.read(), 10)
        if event.type != v1.BOOKMARK:
            seen.append((event.type, meta.unwrap(event.object).metadata.name))
    return seen


@pytest.fixture
async def workers(etcd: EtcdServer) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, str]]:
    """(supervisor, gRPC address, metrics base URL) of `cara-apiserver --workers 2`, once ready."""
    address, metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "caravanserai.apiserver", "--etcd-endpoints", etcd.endpoint, "--listen", address,
        "--etcd-prefix", f"/workers-{os.getpid()}-{free_port()}", "--metrics-listen", metrics, "--workers", "2",
        "--shutdown-grace", "1", "--log-level", "warning",
    )  # fmt: skip
    try:

        async def ready() -> bool:
            assert proc.returncode is None, "the supervisor exited"
            try:
                return (await _get(f"http://{metrics}/readyz"))[0] == 200
            except aiohttp.ClientError:
                return False

        await wait_for(ready, 60, message="both workers ready")
        yield proc, address, f"http://{metrics}"
    finally:
        pids = _children(proc.pid)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for pid in pids:  # a SIGKILLed supervisor's workers get SIGTERM (PR_SET_PDEATHSIG); make sure
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_two_workers_agree_through_etcd(workers: tuple[asyncio.subprocess.Process, str, str]) -> None:
    _proc, address, _ = workers
    async with AsyncExitStack() as stack:
        by_worker: dict[int, tuple[Client, Any]] = {}
        for _ in range(CONNECTIONS):
            client = await stack.enter_async_context(Client(address, own_connection=True))
            worker, call = await _watch(client, "")
            if worker in by_worker:
                call.cancel()
            else:
                by_worker[worker] = (client, call)
            if len(by_worker) == 2:
                break
        assert sorted(by_worker) == [0, 1], "SO_REUSEPORT spread the connections over both workers"
        (first, first_watch), (second, second_watch) = by_worker[0], by_worker[1]

        # A write through either worker reaches the watch on the other.
        a = await first.projects.create(project("through-0"))
        await second.projects.create(project("through-1"))
        assert await _names(second_watch, 2) == [(v1.ADDED, "through-0"), (v1.ADDED, "through-1")]
        assert await _names(first_watch, 2) == [(v1.ADDED, "through-0"), (v1.ADDED, "through-1")]

        # A watch that saw `a` on worker 0 resumes on worker 1 from a's version: exactly what came after.
        await first.projects.delete("through-0")
        worker, resumed = await _watch(second, a.metadata.resource_version)
        assert worker == 1
        assert await _names(resumed, 2) == [(v1.ADDED, "through-1"), (v1.DELETED, "through-0")]
        for call in (first_watch, second_watch, resumed):
            call.cancel()

        # A kind defined through worker 0 is served by worker 1 at once.
        await define_webfarm(first)
        created = await second.resource(webfarm_messages().WebFarm).create(webfarm("at-once", replicas=2))
        assert created.spec.replicas == 2


async def test_endpoint_covers_both_workers_and_a_killed_worker_comes_back(
    workers: tuple[asyncio.subprocess.Process, str, str],
) -> None:
    proc, address, metrics = workers
    async with Client(address) as client:
        await client.projects.create(project("counted"))
    status, text = await _get(f"{metrics}/metrics")
    assert status == 200
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    up = {s.labels["worker"]: s.value for s in samples if s.name == "caravanserai_apiserver_worker_up"}
    assert up == {"0": 1.0, "1": 1.0}
    creates = [s for s in samples if s.name == "caravanserai_apiserver_requests_total" and s.labels["verb"] == "Create"]
    assert sum(s.value for s in creates) == 1 and {s.labels["worker"] for s in creates} <= {"0", "1"}

    victim = _children(proc.pid)[0]
    os.kill(victim, signal.SIGKILL)

    async def restarted() -> bool:
        _status, text = await _get(f"{metrics}/metrics")
        restarts = [s.value for f in text_string_to_metric_families(text) for s in f.samples
                    if s.name == "caravanserai_apiserver_worker_restarts_total"]  # fmt: skip
        return sum(restarts) == 1 and (await _get(f"{metrics}/readyz"))[0] == 200

    await wait_for(restarted, 30, message="the killed worker restarted and ready")
    assert victim not in _children(proc.pid) and len(_children(proc.pid)) == 2

    workers_pids = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 20) == 0
    assert not [pid for pid in workers_pids if _alive(pid)], "SIGTERM left a worker behind"


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "cara-apiserver: --workers: must be at least 1, got 0"),
    (["--workers", "2", "--listen", "127.0.0.1:0"], "cara-apiserver: --workers: 2 workers share one address"),
])  # fmt: skip
async def test_bad_worker_count_is_one_line(flags: list[str], message: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "caravanserai.apiserver", *flags, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 1
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines


async def test_a_worker_that_cannot_start_ends_the_supervisor(etcd: EtcdServer) -> None:
    with socket.socket() as taken:  # a listener without SO_REUSEPORT: no worker can bind the port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "caravanserai.apiserver", "--etcd-endpoints", etcd.endpoint,
            "--listen", f"127.0.0.1:{port}", "--metrics-listen", "off", "--workers", "2",
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert "cara-apiserver: worker 0 exited with code 1 during start-up" in err.decode()
    assert "Traceback" not in err.decode()


async def test_an_apiserver_that_has_not_followed_a_definition_waits_for_it(
    api: RunningApiServer, client: Client
) -> None:
    """In process: the kind is taken out of the table as if this apiserver (or worker) had not followed its stored
    definition yet; a create waits until it is served again instead of calling the resource unknown, and a
    resource without any stored definition is refused at once."""
    await define_webfarm(client)
    sets = client.resource(webfarm_messages().WebFarm)
    service = api.server.service
    assert service is not None
    strategy, cache = service.kinds.get("webfarms"), service.cache("webfarms")
    service.unserve("webfarms")
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, service.serve, strategy, cache)
    started = loop.time()
    created = await sets.create(webfarm("waited", replicas=1))
    assert created.metadata.name == "waited" and loop.time() - started >= 0.25
    started = loop.time()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.stub.List(v1.ListRequest(resource="nosuchkinds"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown resource 'nosuchkinds'" in (refused.value.details() or "")
    assert loop.time() - started < 2, "no stored definition: refused without waiting"
