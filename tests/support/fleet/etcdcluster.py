"""A real etcd raft cluster: one member per fleet host, over the hosts' addresses, with mutual TLS.

* Member `m<i>` of host `h` listens for clients on `https://<h.address>:2379` and for peers on `:2380` inside the
  host's namespace (ports are fixed: every namespace has its own), with client and peer certificate
  authentication (one `etcd` certificate naming every member's address, from `deploy/certs.sh`).
* Short raft timings (heartbeat 100 ms, election 1 s) so a killed leader is replaced within about a second.
* `leader()` asks every reachable member (`etcdctl endpoint status`) and returns the one that leads.
* `kill(member)`/`start(member)` SIGKILL a member and run it again on its data; `snapshot(path)` and
  `restore(path)` are the operator's backup and restore (`etcdctl snapshot save/restore`): restore replaces every
  member's data with the snapshot and starts a new cluster from it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from caravanserai.process.etcdmember import ETCD_MEMBER_FLAGS
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.etcd import endpoint_healthy
from support.fleet.netns import Host
from support.fleet.process import HostProcess

CLIENT_PORT = 2379
PEER_PORT = 2380


@dataclass
class EtcdMember:
    """One member: its host, name, data directory and process."""

    name: str
    host: Host
    data_dir: Path
    process: HostProcess

    @property
    def endpoint(self) -> str:
        return f"https://{self.host.address}:{CLIENT_PORT}"

    @property
    def peer_url(self) -> str:
        return f"https://{self.host.address}:{PEER_PORT}"


class EtcdCluster:
    """The members on `hosts`; `tls` is the members' certificate (server and peer), `client_tls` etcdctl's."""

    def __init__(self, hosts: list[Host], workdir: Path, *, tls: TLSFiles, client_tls: TLSFiles) -> None:
        self.workdir = workdir
        self.tls = tls
        self.client_tls = client_tls
        self.members = [self._member(f"m{i}", host) for i, host in enumerate(hosts)]

    def _member(self, name: str, host: Host) -> EtcdMember:
        data_dir = self.workdir / name
        process = HostProcess(
            f"etcd-{name}", [], log_path=self.workdir / f"{name}.log", netns=host.netns, stop_timeout=10.0
        )
        member = EtcdMember(name, host, data_dir, process)
        return member

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    def _argv(self, member: EtcdMember) -> list[str]:
        tls = self.tls
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        return [
            "etcd",
            f"--name={member.name}",
            f"--data-dir={member.data_dir}",
            f"--listen-client-urls={member.endpoint}",
            f"--advertise-client-urls={member.endpoint}",
            f"--listen-peer-urls={member.peer_url}",
            f"--initial-advertise-peer-urls={member.peer_url}",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",
            "--initial-cluster-token=caravanserai-fleet",
            "--heartbeat-interval=100",
            "--election-timeout=1000",
            "--experimental-watch-progress-notify-interval=1s",
            *ETCD_MEMBER_FLAGS,
            "--logger=zap",
            "--log-level=warn",
            f"--cert-file={tls.cert}",
            f"--key-file={tls.key}",
            f"--trusted-ca-file={tls.ca}",
            "--client-cert-auth",
            f"--peer-cert-file={tls.cert}",
            f"--peer-key-file={tls.key}",
            f"--peer-trusted-ca-file={tls.ca}",
            "--peer-client-cert-auth",
        ]

    async def start(self, timeout: float = 60.0) -> None:
        """Start every member that is not running and wait until all are healthy."""
        for member in self.members:
            if not member.process.running:
                member.process.argv = self._argv(member)
                await member.process.start()
        await asyncio.gather(*(self.wait_healthy(m, timeout) for m in self.members))

    async def start_member(self, member: EtcdMember, timeout: float = 60.0) -> None:
        """Run `member` again on its data directory and wait until it is healthy."""
        member.process.argv = self._argv(member)
        await member.process.start()
        await self.wait_healthy(member, timeout)

    def _ssl(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.client_tls.ca)
        context.load_cert_chain(self.client_tls.cert, self.client_tls.key)
        return context

    async def wait_healthy(self, member: EtcdMember, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if not member.process.running:
                raise RuntimeError(f"etcd {member.name} exited:\n{member.process.log_tail()}")
            if await endpoint_healthy(member.host.address, CLIENT_PORT, self._ssl()):
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"etcd {member.name} not healthy after {timeout}s:\n{member.process.log_tail()}")

    def etcdctl(self, *args: str, endpoints: list[str] | None = None) -> str:
        """Run etcdctl (v3 API, the client certificate) against `endpoints` (default: every member); stdout."""
        tls = self.client_tls
        argv = [
            shutil.which("etcdctl") or "etcdctl",
            f"--endpoints={','.join(endpoints or self.endpoints)}",
            f"--cacert={tls.ca}",
            f"--cert={tls.cert}",
            f"--key={tls.key}",
            "--dial-timeout=2s",
            "--command-timeout=5s",
            *args,
        ]
        env = {"ETCDCTL_API": "3"}
        result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    async def leader(self) -> EtcdMember:
        """The member that leads now (asked of every running member)."""
        for member in self.members:
            if not member.process.running:
                continue
            try:
                out = await asyncio.to_thread(
                    self.etcdctl, "endpoint", "status", "-w", "json", endpoints=[member.endpoint]
                )
            except RuntimeError:
                continue
            status = json.loads(out)[0]["Status"]
            if status["leader"] == status["header"]["member_id"]:
                return member
        raise RuntimeError("no etcd member reports itself leader")

    async def snapshot(self, path: Path) -> None:
        """`etcdctl snapshot save` from the current leader."""
        leader = await self.leader()
        await asyncio.to_thread(self.etcdctl, "snapshot", "save", str(path), endpoints=[leader.endpoint])

    async def stop(self) -> None:
        await asyncio.gather(*(m.process.stop() for m in self.members))

    async def restore(self, path: Path) -> None:
        """Stop every member, replace its data with the snapshot (`etcdctl snapshot restore`), start them again."""
        await self.stop()
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for member in self.members:
            shutil.rmtree(member.data_dir, ignore_errors=True)
            await asyncio.to_thread(
                self.etcdctl,
                "snapshot", "restore", str(path),
                f"--name={member.name}",
                f"--data-dir={member.data_dir}",
                f"--initial-cluster={initial}",
                "--initial-cluster-token=caravanserai-fleet-restored",
                f"--initial-advertise-peer-urls={member.peer_url}",
            )  # fmt: skip
        await self.start()


__all__ = ["CLIENT_PORT", "PEER_PORT", "EtcdCluster", "EtcdMember"]
