"""A second apiserver on a port already served is refused with a clear error: gRPC's default SO_REUSEPORT would
let it silently take a share of the connections; only the workers of one `--workers` supervisor share a port."""

from __future__ import annotations

import pytest

from caravanserai.testing.apiserver import start_apiserver
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.ports import free_port


async def test_a_second_apiserver_on_the_same_port_is_refused(etcd: EtcdServer) -> None:
    listen = f"127.0.0.1:{free_port()}"
    first = await start_apiserver(etcd.endpoint, listen=listen)
    try:
        with pytest.raises(OSError, match=rf"cannot listen on {listen}: the address is already in use"):
            second = await start_apiserver(etcd.endpoint, listen=listen)
            await second.stop()
    finally:
        await first.stop()


async def test_workers_of_one_supervisor_still_share_a_port(etcd: EtcdServer) -> None:
    listen = f"127.0.0.1:{free_port()}"
    first = await start_apiserver(etcd.endpoint, listen=listen, worker=0)
    try:
        second = await start_apiserver(etcd.endpoint, listen=listen, worker=1)
        await second.stop()
    finally:
        await first.stop()
