"""Clients given several servers (`a:7420,b:7420`) fail over between them: no error reaches the caller."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.process.tls import TLSFiles
from caravanserai.testing import builders, free_port
from caravanserai.testing.apiserver import start_apiserver
from caravanserai.testing.etcd import EtcdServer
from support.processes import ApiProcess

ROOT = Path(__file__).resolve().parents[2]


def _tls(certs: Path, name: str) -> TLSFiles:
    return TLSFiles(cert=str(certs / f"{name}.crt"), key=str(certs / f"{name}.key"), ca=str(certs / "ca.crt"))


async def test_tls_client_fails_over_and_checks_the_server_name(etcd: EtcdServer, tmp_path: Path) -> None:
    """Two TLS apiservers; the client names them `localhost:a,127.0.0.1:b`. Stopping the one in use is invisible."""
    subprocess.run(
        [str(ROOT / "deploy" / "certs.sh"), str(tmp_path), "apiserver", "admin"], check=True, capture_output=True
    )
    server_tls = _tls(tmp_path, "apiserver")
    first = await start_apiserver(etcd.endpoint, tls=server_tls)
    second = await start_apiserver(etcd.endpoint, prefix=first.prefix, tls=server_tls)
    try:
        target = f"localhost:{first.server.port},127.0.0.1:{second.server.port}"
        async with Client(target, tls=_tls(tmp_path, "admin"), timeout=5, retry_timeout=20) as client:
            await client.projects.create(builders.project("before"))
            await first.stop()
            for index in range(20):
                await client.projects.create(builders.project(f"after-{index}"))
            names = {p.metadata.name for p in await client.projects.list()}
            assert names == {"before", *(f"after-{i}" for i in range(20))}
    finally:
        await first.stop()
        await second.stop()


async def test_killing_one_apiserver_under_read_load_fails_nothing(etcd: EtcdServer) -> None:
    """SIGKILL one of two apiserver processes while 4 readers get and list through a client naming both: every
    call succeeds (in-flight calls on the lost connection are repeated on the other server)."""
    prefix = f"/failover-{os.getpid()}-{free_port()}"
    servers = [ApiProcess(etcd.endpoint, prefix=prefix), ApiProcess(etcd.endpoint, prefix=prefix)]
    for server in servers:
        await server.start()
    try:
        target = ",".join(s.address for s in servers)
        async with Client(target, timeout=5, retry_timeout=30) as client:
            names = [f"load-{i}" for i in range(4)]
            for name in names:
                await client.projects.create(builders.project(name))
            calls = dict.fromkeys(names, 0)

            async def reader(name: str, stop: asyncio.Event) -> None:
                while not stop.is_set():
                    project: v1.Project = await client.projects.get(name)
                    assert project.metadata.name == name
                    assert len(await client.projects.list()) == len(names)
                    calls[name] += 1

            stop = asyncio.Event()
            tasks = [asyncio.create_task(reader(n, stop)) for n in names]
            await asyncio.sleep(1.0)
            servers[0].kill()
            before = sum(calls.values())
            await asyncio.sleep(2.0)
            stop.set()
            await asyncio.gather(*tasks)  # any error a reader saw is raised here
            assert sum(calls.values()) > before + 8  # kept serving after the kill
    finally:
        for server in servers:
            await server.stop()
