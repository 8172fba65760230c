"""The agent under mutual TLS with a node identity: everything it does fits the `node:<name>` role (reading the
Secret its project references included), and its Agent service requires a client certificate too."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
import uuid

import grpc
import pytest
from agent_harness import NODE_LABEL, bind, docker, docker_list, remove_node_objects, wait_phase

from caravanserai import v1
from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig
from caravanserai.agent.docker import naming
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.client import Client
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tls(certs: pathlib.Path, identity: str) -> TLSFiles:
    name = identity.replace(":", "-")
    return TLSFiles(cert=str(certs / f"{name}.crt"), key=str(certs / f"{name}.key"), ca=str(certs / "ca.crt"))


async def check_logs_need_a_certificate(port: int, files: TLSFiles) -> None:
    """The Agent service answers over mutual TLS, and refuses a client without a certificate."""
    request = api_pb2.LogsRequest(project="secure", tail=-1)
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", files.channel_credentials()) as channel:
        lines = [line async for line in api_pb2_grpc.AgentStub(channel).Logs(request, timeout=10)]
    assert lines == []  # `sleep` prints nothing; the call itself succeeded
    anonymous = TLSFiles(ca=files.ca).channel_credentials()
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", anonymous) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in api_pb2_grpc.AgentStub(channel).Logs(request, timeout=10):
                pass
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


async def check_only_admin_may_read_logs(port: int, certs: pathlib.Path, identities: list[str]) -> None:
    """Logs answer `admin` and refuse every other identity, another node's included, before reading anything."""
    request = api_pb2.LogsRequest(project="secure", tail=-1)
    for identity in identities:
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", tls(certs, identity).channel_credentials()) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                async for _ in api_pb2_grpc.AgentStub(channel).Logs(request, timeout=10):
                    pass
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, identity
        assert f"{identity} may not read logs" in (refused.value.details() or ""), identity


async def check_only_admin_may_exec(port: int, certs: pathlib.Path) -> None:
    """Exec and PortForward answer the `admin` certificate and refuse any other identity."""

    async def run(identity: str) -> list[api_pb2.ExecResponse]:
        start = api_pb2.ExecStart(project="secure", service="svc0", command=["sh", "-c", "echo hi"])
        requests = iter([api_pb2.ExecRequest(start=start)])
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", tls(certs, identity).channel_credentials()) as channel:
            return [r async for r in api_pb2_grpc.AgentStub(channel).Exec(requests, timeout=20)]

    assert [r.WhichOneof("response") for r in await run("admin")] == ["stdout", "exit_code"]
    for method in ("Exec", "PortForward"):
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", tls(certs, "viewer").channel_credentials()) as channel:
            call = getattr(api_pb2_grpc.AgentStub(channel), method)(iter([]), timeout=20)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                async for _ in call:
                    pass
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "viewer may not" in (refused.value.details() or "")


async def check_node_reads_its_secret(admin: Client, node: str) -> None:
    """The agent read the Secret its project references under its node identity, and follows changes of it."""
    container = naming.container_name("secure", "svc0", node)

    def token() -> str:
        return docker("exec", container, "sh", "-c", 'echo "$TOKEN"', check=False)

    assert token() == "t-1"
    current = await admin.secrets.get("secure-creds")
    current.spec.data["token"] = b"t-2"
    await admin.secrets.update(current)
    await wait_for(lambda: token() == "t-2", timeout=30, message="the container recreated with the new token")


async def test_agent_works_with_a_node_identity(etcd: EtcdServer, image: str, tmp_path: pathlib.Path) -> None:
    node = f"e2e-{uuid.uuid4().hex[:8]}"
    identities = ["apiserver", "admin", "viewer", f"node:{node}", "node:other", "controller:manager"]
    subprocess.run([str(ROOT / "deploy" / "certs.sh"), str(tmp_path), *identities], check=True, capture_output=True)
    async with (
        apiserver(etcd.endpoint, tls=tls(tmp_path, "apiserver")) as api,
        Client(api.address, tls=tls(tmp_path, "admin"), timeout=10, retry_timeout=10) as admin,
    ):
        config = AgentConfig(
            server=api.address,
            node_name=node,
            tls=tls(tmp_path, f"node:{node}"),
            listen="127.0.0.1:0",
            heartbeat_interval=0.5,
            stop_timeout=1,
            throughput_bytes=64 * 1024,
        )
        agent = Agent(config)
        task = asyncio.create_task(agent.run())
        try:

            async def ready() -> bool:
                if task.done():
                    task.result()
                return (await admin.nodes.get(node)).status.state == v1.NODE_READY and agent.synced.is_set()

            await wait_for(ready, timeout=20, message="the agent to register over mutual TLS")
            secret = v1.Secret(metadata=v1.ObjectMeta(name="secure-creds"), spec=v1.SecretSpec(data={"token": b"t-1"}))
            await admin.secrets.create(secret)
            secure = project("secure", image=image)
            secure.spec.services[0].env.add(name="TOKEN", value_from=v1.KeyRef(secret="secure-creds", key="token"))
            await admin.projects.create(secure)
            await bind(admin, "secure", node)
            await wait_phase(admin, "secure", v1.RUNNING)
            await check_node_reads_its_secret(admin, node)
            await check_logs_need_a_certificate(agent.port, tls(tmp_path, "admin"))
            await check_only_admin_may_exec(agent.port, tmp_path)
            await check_only_admin_may_read_logs(agent.port, tmp_path, ["viewer", "node:other", f"node:{node}"])
            await admin.projects.delete("secure")
            await wait_phase(admin, "secure", v1.TERMINATED, timeout=20)
            assert docker_list("container", f"{NODE_LABEL}={node}") == []
            assert (await admin.leases.get(node)).spec.holder_identity == node
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.to_thread(remove_node_objects, node)
