"""Client retries across an apiserver restart, against a real etcd and apiserver: a call that never reached a
server is repeated for every verb; an ambiguous failure after sending is not."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.client.client import never_sent
from caravanserai.errors import NotFound, Unavailable
from caravanserai.testing.apiserver import RunningApiServer, start_apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for


async def test_create_and_delete_wait_out_a_restart(api: RunningApiServer, etcd: EtcdServer) -> None:
    async with Client(api.address, timeout=5, retry_timeout=20) as client:
        await client.projects.create(project("doomed"))
        kept = await client.projects.create(project("kept"))
        await api.stop()
        # the calls below are made while the server is down: once the channel has seen the connection go (a call
        # racing the server's close is ambiguous, which the tests below cover)
        await wait_for(lambda: not client.connected(), 10, message="the channel sees the server gone")
        create = asyncio.create_task(client.projects.create(project("fresh")))
        delete = asyncio.create_task(client.projects.delete("doomed"))
        kept.metadata.labels["seen"] = "yes"
        update = asyncio.create_task(client.projects.update(kept))
        await asyncio.sleep(1.0)  # the server is down: each verb keeps trying instead of failing at once
        assert not create.done() and not delete.done() and not update.done()
        restarted = await start_apiserver(etcd.endpoint, prefix=api.prefix, listen=api.address, bookmark_interval=0.2)
        try:
            created = await asyncio.wait_for(create, 20)
            deleted = await asyncio.wait_for(delete, 20)
            assert (await asyncio.wait_for(update, 20)).metadata.labels["seen"] == "yes"
            assert created.status.phase == v1.PENDING and deleted.deleted
            with pytest.raises(NotFound):
                await client.projects.get("doomed")
            assert (await client.projects.get("fresh")).metadata.uid == created.metadata.uid
        finally:
            await restarted.stop()


async def test_unsent_calls_give_up_after_retry_timeout(api: RunningApiServer) -> None:
    async with Client(api.address, timeout=5, retry_timeout=0.5) as client:
        await api.stop()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(Unavailable, match=r"Connection refused|failed to connect"):
            await client.projects.create(project("never"))
        assert loop.time() - started < 3  # retry_timeout bounds the retries


def _error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


@pytest.mark.parametrize(
    ("code", "details", "unsent"),
    [
        (
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
            "Failed to connect to remote host: Connection refused",
            True,
        ),
        (grpc.StatusCode.UNAVAILABLE, "connections to all backends failing; last error: UNAVAILABLE", True),
        (grpc.StatusCode.UNAVAILABLE, "Socket closed", False),
        (grpc.StatusCode.UNAVAILABLE, "Connection reset by peer", False),
        (grpc.StatusCode.UNAVAILABLE, "GOAWAY received", False),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", False),
        (grpc.StatusCode.CANCELLED, "Cancelled on the server side", False),
    ],
)
def test_only_failures_before_sending_count_as_never_sent(code: grpc.StatusCode, details: str, unsent: bool) -> None:
    assert never_sent(_error(code, details)) is unsent
