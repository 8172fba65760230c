"""The process supervisor behind `cara up`: runs etcd, the apiserver, the controllers and an agent, restarting any
that dies, until SIGTERM.

Guarantees:

* Children start in dependency order (etcd, apiserver, controller manager, agent) and each one's output goes to
  `<data-dir>/logs/<name>.log`.
* A child that exits is restarted with backoff (1 s doubling to 30 s, reset after 60 s of good health).
* On SIGTERM or SIGINT every child gets SIGTERM in reverse order, then SIGKILL after 10 s; the supervisor exits
  only when all are gone, so `cara down` leaves no process behind.
* `<data-dir>/cara.json` describes the running cluster (pids, addresses) while the supervisor runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "cara.json"


@dataclass
class Child:
    """One supervised process."""

    name: str
    argv: list[str]
    pid: int = 0
    restarts: int = 0
    proc: asyncio.subprocess.Process | None = field(default=None, repr=False)


@dataclass
class ClusterSpec:
    """What `cara up` asked for."""

    data_dir: str
    api_listen: str
    etcd_client_port: int
    etcd_peer_port: int
    agent: bool
    agent_listen: str
    node_name: str

    def children(self) -> list[Child]:
        py = sys.executable
        etcd_url = f"http://127.0.0.1:{self.etcd_client_port}"
        peer_url = f"http://127.0.0.1:{self.etcd_peer_port}"
        data = Path(self.data_dir)
        result = [
            Child("etcd", [
                "etcd", "--name", "cara", "--data-dir", str(data / "etcd"),
                "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"cara={peer_url}",
            ]),
            Child("apiserver", [py, "-m", "caravanserai.apiserver", "--etcd-endpoints", etcd_url,
                                "--listen", self.api_listen]),
            Child("controller-manager", [py, "-m", "caravanserai.controllers.manager", "--server", self.api_listen,
                                         "--no-leader-elect", "--metrics-port", "-1"]),
        ]
        if self.agent:
            result.append(Child("agent", [py, "-m", "caravanserai.agent", "--server", self.api_listen,
                                          "--node-name", self.node_name, "--listen", self.agent_listen]))
        return result


class Supervisor:
    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.data = Path(spec.data_dir)
        self.children = spec.children()
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        (self.data / "logs").mkdir(parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        tasks = []
        for child in self.children:
            tasks.append(asyncio.create_task(self._keep_running(child)))
            await asyncio.sleep(1.0 if child.name == "etcd" else 0.3)
        await self._stopping.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for child in reversed(self.children):
            await self._stop(child)
        self._state_path().unlink(missing_ok=True)

    async def _keep_running(self, child: Child) -> None:
        delay = 1.0
        while True:
            started = asyncio.get_running_loop().time()
            await self._start(child)
            assert child.proc is not None
            code = await child.proc.wait()
            if asyncio.get_running_loop().time() - started > 60:
                delay = 1.0
            self._log(f"{child.name} exited with {code}; restarting in {delay:.0f}s")
            child.restarts += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def _start(self, child: Child) -> None:
        log = open(self.data / "logs" / f"{child.name}.log", "ab")  # noqa: SIM115 - owned by the child
        try:
            child.proc = await asyncio.create_subprocess_exec(*child.argv, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL)
        finally:
            log.close()
        child.pid = child.proc.pid
        self._write_state()

    async def _stop(self, child: Child) -> None:
        proc = child.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    def _state_path(self) -> Path:
        return self.data / STATE_FILE

    def _write_state(self) -> None:
        state = {
            "supervisor_pid": os.getpid(),
            "spec": asdict(self.spec),
            "children": {c.name: {"pid": c.pid, "restarts": c.restarts, "argv": c.argv} for c in self.children},
        }
        tmp = self._state_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self._state_path())

    def _log(self, message: str) -> None:
        with open(self.data / "logs" / "supervisor.log", "a") as f:
            f.write(message + "\n")


def main() -> None:
    spec = ClusterSpec(**json.loads(sys.argv[1]))
    asyncio.run(Supervisor(spec).run())


if __name__ == "__main__":
    main()
