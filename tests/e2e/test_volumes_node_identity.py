"""Volume backups, a move's hand-off and a restore by agents with node identities (mutual TLS): everything the
agents do fits the `node:<name>` role — reading the BackupRepository and its Secret while a bound project uses
them, writing the volumes' status, and finishing the move they were asked for."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
import uuid
from collections.abc import AsyncIterator

import pytest
from agent_harness import bind, remove_node_objects, wait_phase
from volume_harness import add_repository, ask_move, back_up_now, backed_up, exec_in, local_repository, volume_status

from caravanserai import v1
from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig
from caravanserai.client import Client
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tls(certs: pathlib.Path, identity: str) -> TLSFiles:
    name = identity.replace(":", "-")
    return TLSFiles(cert=str(certs / f"{name}.crt"), key=str(certs / f"{name}.key"), ca=str(certs / "ca.crt"))


@contextlib.asynccontextmanager
async def node_agent(address: str, node: str, certs: pathlib.Path, admin: Client) -> AsyncIterator[Agent]:
    config = AgentConfig(
        server=address,
        node_name=node,
        tls=tls(certs, f"node:{node}"),
        listen="127.0.0.1:0",
        heartbeat_interval=0.5,
        stop_timeout=1,
        throughput_bytes=64 * 1024,
        restic_cache_dir=str(certs / "restic-cache"),
    )
    agent = Agent(config)
    task = asyncio.create_task(agent.run())
    try:

        async def ready() -> bool:
            if task.done():
                task.result()
            return (await admin.nodes.get(node)).status.state == v1.NODE_READY and agent.synced.is_set()

        await wait_for(ready, timeout=20, message=f"agent {node} registered over mutual TLS")
        yield agent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.to_thread(remove_node_objects, node)


async def test_agents_with_node_identities_back_up_hand_over_and_restore(
    etcd: EtcdServer, image: str, tmp_path: pathlib.Path
) -> None:
    first, second = (f"e2e-{uuid.uuid4().hex[:8]}" for _ in range(2))
    identities = ["apiserver", "admin", f"node:{first}", f"node:{second}"]
    subprocess.run([str(ROOT / "deploy" / "certs.sh"), str(tmp_path), *identities], check=True, capture_output=True)
    async with (
        apiserver(etcd.endpoint, tls=tls(tmp_path, "apiserver")) as api,
        Client(api.address, tls=tls(tmp_path, "admin"), timeout=10, retry_timeout=10) as admin,
        node_agent(api.address, first, tmp_path, admin),
        node_agent(api.address, second, tmp_path, admin),
    ):
        repository = await local_repository(tmp_path, "pw")
        await add_repository(admin, "local", repository.url, "pw")
        await admin.projects.create(backed_up("vault", image, "local"))
        await bind(admin, "vault", first)
        await wait_phase(admin, "vault", v1.RUNNING)
        exec_in("vault", first, "echo kept > /data/f")
        await back_up_now(admin, "vault")

        await ask_move(admin, "vault")
        pending = await wait_phase(admin, "vault", v1.PENDING, timeout=30)
        status = volume_status(pending)
        assert status is not None and status.handoff_snapshot  # finished by the node it left
        await bind(admin, "vault", second)
        moved = await wait_phase(admin, "vault", v1.RUNNING, timeout=30)
        restored = volume_status(moved)
        assert restored is not None and restored.restored.snapshot.id == status.handoff_snapshot
        assert exec_in("vault", second, "cat /data/f") == "kept"
