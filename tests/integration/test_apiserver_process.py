"""cara-apiserver as a process: serves health, logs JSON lines, stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from caravanserai.client import Client
from caravanserai.testing import free_port
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for
from support import http


async def test_process_serves_health_and_stops_on_sigterm(etcd) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    address = f"127.0.0.1:{free_port()}"
    metrics = f"127.0.0.1:{free_port()}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caravanserai.apiserver",
        "--etcd-endpoints",
        etcd.endpoint,
        "--listen",
        address,
        "--etcd-prefix",
        f"/proc-{os.getpid()}",
        "--metrics-listen",
        metrics,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with Client(address, retry_timeout=0) as c:

            async def answers() -> bool:
                await c.projects.list()
                return True

            await wait_for(answers, 20)
            await c.projects.create(project("alive"))
        async with grpc.aio.insecure_channel(address) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        for path in ("/healthz", "/readyz", "/metrics"):
            reply = await asyncio.to_thread(http.get, f"http://{metrics}{path}")
            assert reply.status == 200
            if path == "/metrics":
                assert (
                    b'caravanserai_apiserver_requests_total{code="OK",resource="projects",verb="Create"} 1.0'
                    in reply.body
                )
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 15)
        assert code == 0
        assert proc.stderr is not None
        lines = [json.loads(line) for line in (await proc.stderr.read()).decode().splitlines() if line.startswith("{")]
        assert any(line.get("event") == "apiserver serving" for line in lines)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_bad_flags_give_one_line(etcd) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caravanserai.apiserver",
        "--etcd-endpoints",
        etcd.endpoint,
        "--listen",
        "0.0.0.0:0",
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 1
    text = err.decode()
    assert "refusing plain TCP on 0.0.0.0:0" in text and "Traceback" not in text
