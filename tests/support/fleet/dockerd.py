"""A Docker Engine of one fleet host: its own dockerd in the host's network namespace.

* Own `--data-root`, `--exec-root`, `--pidfile` and unix socket below the run directory, and its own cgroup
  parent (`/<prefix>-<host>`), so engines never see each other's containers and a killed run's containers can be
  found by cgroup.
* Started with `nsenter --net=…` (see `process.HostProcess`); inside the namespace it makes its own docker0 and
  project bridges and its own iptables rules (iptables is per namespace), so published ports are reachable on
  the host's address and nothing changes in the root namespace.
* `load_image(name)` copies an image of the machine's engine into this one (`docker save | docker load`); no
  registry is ever contacted.
* `stop()` stops the engine (dockerd stops its containers when it exits); `cleanup.remove_run` removes anything
  left.
"""

from __future__ import annotations

import asyncio
import datetime
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.fleet.netns import Host
from support.fleet.process import HostProcess


@dataclass(frozen=True, slots=True)
class EngineContainer:
    """A container as `docker ps` reports it."""

    id: str
    name: str
    state: str  # running, exited, created, …
    labels: dict[str, str]

    @property
    def running(self) -> bool:
        return self.state == "running"


class HostDocker:
    """dockerd of `host`; `url` is what the agent's `--docker-host` takes."""

    def __init__(self, host: Host, workdir: Path, *, cgroup_parent: str) -> None:
        self.host = host
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.socket = workdir / "docker.sock"
        self.process = HostProcess(
            f"dockerd-{host.name}",
            [
                "dockerd",
                f"--data-root={workdir / 'data'}",
                f"--exec-root={workdir / 'exec'}",
                f"--pidfile={workdir / 'docker.pid'}",
                f"--host=unix://{self.socket}",
                f"--cgroup-parent=/{cgroup_parent}",
                # room for thousands of project networks (the defaults give about 30); private to the namespace
                "--default-address-pool=base=172.80.0.0/12,size=24",
                "--log-level=warn",
            ],
            log_path=workdir / "dockerd.log",
            netns=host.netns,
            stop_timeout=30.0,
        )

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def cli(self, *args: str, stdin: bytes | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
        """Run the docker CLI against this engine (blocking)."""
        docker = shutil.which("docker") or "docker"
        return subprocess.run(
            [docker, "-H", self.url, *args], input=stdin, capture_output=True, timeout=timeout, check=False
        )

    async def start(self, timeout: float = 60.0) -> None:
        """Start dockerd and wait until it answers."""
        await self.process.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if not self.process.running:
                raise RuntimeError(f"dockerd of {self.host.name} exited:\n{self.process.log_tail()}")
            result = await asyncio.to_thread(self.cli, "version", "--format", "{{.Server.Version}}", timeout=10)
            if result.returncode == 0:
                return
            await asyncio.sleep(0.3)
        raise TimeoutError(f"dockerd of {self.host.name} not ready after {timeout}s:\n{self.process.log_tail()}")

    async def load_image(self, name: str) -> None:
        """Copy image `name` from the machine's default engine into this one."""

        def copy() -> None:
            saved = subprocess.run(["docker", "save", name], capture_output=True, check=False, timeout=120)
            if saved.returncode != 0:
                raise RuntimeError(f"docker save {name}: {saved.stderr.decode(errors='replace').strip()}")
            loaded = self.cli("load", stdin=saved.stdout)
            if loaded.returncode != 0:
                raise RuntimeError(f"docker load into {self.host.name}: {loaded.stderr.decode(errors='replace')}")

        await asyncio.to_thread(copy)

    async def containers(self, *filters: str) -> list[EngineContainer]:
        """Containers of this engine (running or not) matching `docker ps` filters such as `label=k=v`."""
        args = ["ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Labels}}"]
        for flt in filters:
            args += ["--filter", flt]
        result = await asyncio.to_thread(self.cli, *args, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(f"docker ps on {self.host.name}: {result.stderr.decode(errors='replace').strip()}")
        rows = []
        for line in result.stdout.decode().splitlines():
            cid, name, state, labels = ([*line.split("\t"), "", "", "", ""])[:4]
            pairs = dict(item.partition("=")[::2] for item in labels.split(",") if item)
            rows.append(EngineContainer(cid, name, state, pairs))
        return rows

    async def stop(self) -> None:
        await self.process.stop()


def engine_time(text: str) -> float:
    """Docker's RFC 3339 time with nanoseconds → seconds since the epoch (0.0 for Docker's zero time)."""
    if text.startswith("0001-"):
        return 0.0
    head, _, rest = text.rstrip("Z").partition(".")
    fraction = float(f"0.{rest}") if rest else 0.0
    return datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC).timestamp() + fraction


__all__ = ["EngineContainer", "HostDocker", "engine_time"]
