"""Reconnecting after an outage, against a real etcd and apiserver: a retry waits for the channel to be ready again,
not for its backoff to run out; the backoff still holds for a server that answers with errors."""

from __future__ import annotations

import asyncio
import contextlib

from caravanserai import v1
from caravanserai.backoff import Backoff
from caravanserai.client import Client
from caravanserai.informer import Informer, WatchOptions
from caravanserai.testing.apiserver import start_apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

# Long, exact delays (no jitter) so that the test can tell a reconnect from a backoff running out.
SLOW = Backoff(initial=4.0, factor=2.0, cap=30.0, jitter=0.0, reset_after=None)


async def test_informer_catches_up_as_soon_as_the_api_is_back(etcd: EtcdServer) -> None:
    api = await start_apiserver(etcd.endpoint, bookmark_interval=0.2)
    restarted = None
    loop = asyncio.get_running_loop()
    async with Client(api.address, timeout=5, retry_timeout=0) as client:
        informer: Informer[v1.Project] = Informer(client.projects, watch_options=WatchOptions(backoff=SLOW))
        running = asyncio.create_task(informer.run())
        try:
            await wait_for(informer.has_synced, 10)
            await api.stop()  # the watch breaks: the informer now waits 4 s, then 8 s, then 16 s …
            await asyncio.sleep(5.0)  # one retry has failed: the backoff's next delay is 8 s
            restarted = await start_apiserver(
                etcd.endpoint, prefix=api.prefix, listen=api.address, bookmark_interval=0.2
            )
            back = loop.time()
            async with Client(api.address) as writer:
                await writer.projects.create(project("after"))
            await wait_for(lambda: informer.get("default/after") is not None, 15)
            caught_up = loop.time() - back
            # gRPC reconnects within its 2 s reconnect backoff; sleeping out the backoff would take about 7 s.
            assert caught_up < 5.0, f"caught up {caught_up:.1f}s after the API was back"
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            if restarted is not None:
                await restarted.stop()


async def test_a_retry_is_cut_short_only_by_a_reconnect(etcd: EtcdServer) -> None:
    api = await start_apiserver(etcd.endpoint, bookmark_interval=0.2)
    restarted = None
    loop = asyncio.get_running_loop()
    try:
        async with Client(api.address, timeout=5, retry_timeout=0) as client:
            await client.projects.list()
            assert client.connected()
            started = loop.time()
            assert await client.retry_pause(0.6) is False  # connected all along: the whole backoff
            assert loop.time() - started >= 0.6

            await api.stop()
            pausing = asyncio.create_task(client.retry_pause(30.0))
            await asyncio.sleep(1.0)
            assert not pausing.done()  # no server: nothing to reconnect to
            restarted = await start_apiserver(
                etcd.endpoint, prefix=api.prefix, listen=api.address, bookmark_interval=0.2
            )
            back = loop.time()
            assert await asyncio.wait_for(pausing, 10) is True
            assert loop.time() - back < 4.5
            assert client.connected()
    finally:
        if restarted is not None:
            await restarted.stop()
        await api.stop()
