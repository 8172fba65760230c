"""`cara-apiserver --workers N`: a supervisor process over N apiserver worker processes serving one address.

Guarantees:

* **One address.** Every worker serves `--listen` (and `--token-listen`) itself, with SO_REUSEPORT: the kernel
  spreads new connections over the workers and a connection stays with the worker that accepted it. A Watch
  tells which worker serves it in its initial metadata (`caravanserai-apiserver-worker: <index>`).
* **Consistent through etcd.** Each worker has its own etcd client and its own watch caches. Resource versions
  are etcd revisions and every worker keeps the same window of history, so a watch resumed on another worker from
  a version goes on exactly after it; reads and writes go to etcd. A kind defined through one worker is served by
  the others on their first request for it (`DefinitionServer.find_kind`).
* **Duties of the whole cluster run once.** Every worker runs the compactor, and one of them compacts etcd per
  interval, as between apiservers (`storage.compaction`): each learns every compaction and trims its watch
  histories to it. Event leases are per worker (each grants one a minute).
* **One HTTP endpoint.** The supervisor serves `--metrics-listen` (`workerendpoint.py`): `/metrics` is every
  worker's exposition with a `worker` label on each sample, plus restarts per worker; `/healthz` and `/readyz` are
  200 only when every worker's own are. Workers serve theirs on Unix sockets in a private directory.
* **Start-up errors end it.** Worker 0 starts first and the others once it is ready, so a configuration error is
  reported once. A worker that exits before it was ever ready (a taken port, an unreadable file) makes the
  supervisor stop the others and exit 1.
* **Crashes are restarted.** A worker that exits after it was ready is started again after 1 s, doubling to 30 s
  (from 1 s again after a minute of good health), logged and counted.
* **SIGTERM stops everything.** On SIGTERM or SIGINT every worker gets SIGTERM (and drains its calls for
  `--shutdown-grace`), SIGKILL `STOP_MARGIN` seconds after that; the supervisor exits 0 once all are gone. A
  worker also gets SIGTERM when the supervisor dies (PR_SET_PDEATHSIG), so even a killed supervisor leaves none.
* Workers log to the supervisor's stderr; every line of theirs carries `worker`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from caravanserai.apiserver.httpendpoint import MetricsEndpoint
from caravanserai.apiserver.workerendpoint import WorkerProbe, WorkersView
from caravanserai.backoff import Backoff
from caravanserai.clock import Clock, SystemClock
from caravanserai.process.shell import keep_restarting
from caravanserai.process.subprocesses import die_with_parent, stop_process

log = structlog.get_logger(__name__)

STOP_MARGIN = 10.0
"""Seconds a worker gets beyond its --shutdown-grace between SIGTERM and SIGKILL."""
RESTART_BACKOFF = Backoff(initial=1.0, cap=30.0, jitter=0.0, reset_after=60.0)
READY_POLL = 0.2  # seconds between looks at a starting worker's /readyz


class WorkerFailed(Exception):
    """A worker exited before it was ever ready: the apiserver cannot start as configured."""


@dataclass
class Worker:
    """One worker process: its index, command line and where its /metrics, /healthz, /readyz answer."""

    index: int
    argv: list[str]
    probe: WorkerProbe
    proc: asyncio.subprocess.Process | None = field(default=None, repr=False)
    restarts: int = 0
    ever_ready: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


def worker_argv(argv: Sequence[str], *, index: int, socket: str) -> list[str]:
    """The command line of worker `index`: the supervisor's own flags, then the worker's (argparse keeps the last
    of a repeated flag): one worker, its index and its Unix-socket endpoint."""
    own = ["--workers", "1", "--worker-index", str(index), "--metrics-listen", f"unix:{socket}"]
    return [sys.executable, "-m", "caravanserai.apiserver", *argv, *own]


class WorkerSupervisor:
    """Runs `workers` apiserver processes with `argv` (the supervisor's flags) until cancelled; see the module."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        workers: int,
        metrics_listen: str,
        allow_insecure: bool,
        grace: float,
        clock: Clock | None = None,
    ) -> None:
        self._argv = list(argv)
        self._count = workers
        self._metrics_listen = metrics_listen
        self._allow_insecure = allow_insecure
        self._grace = grace
        self._clock: Clock = clock or SystemClock()
        self.workers: list[Worker] = []

    async def run(self) -> None:
        """Start the workers and keep them running; returns only when cancelled (every worker stopped first) or
        raises WorkerFailed (every worker stopped first)."""
        with tempfile.TemporaryDirectory(prefix="cara-apiserver-") as directory:
            self.workers = [self._worker(i, directory) for i in range(self._count)]
            view = WorkersView(self.workers)
            endpoint = MetricsEndpoint(view.exposition, ready=view.ready, healthy=view.healthy,
                                       listen=self._metrics_listen, allow_insecure=self._allow_insecure)  # fmt: skip
            await endpoint.start()
            try:
                first = self.workers[0]
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._keep(first), name="worker-0")
                    await self._until_ready(first)
                    for worker in self.workers[1:]:
                        group.create_task(self._keep(worker), name=f"worker-{worker.index}")
                    await asyncio.gather(*(self._until_ready(w) for w in self.workers[1:]))
                    log.info(
                        "apiserver workers serving", workers=self._count, pids=[self._pid(w) for w in self.workers]
                    )
            finally:
                await endpoint.close()

    def _worker(self, index: int, directory: str) -> Worker:
        socket = os.path.join(directory, f"worker-{index}.sock")
        return Worker(index, worker_argv(self._argv, index=index, socket=socket), WorkerProbe(socket))

    @staticmethod
    def _pid(worker: Worker) -> int:
        return worker.proc.pid if worker.proc is not None else 0

    async def _until_ready(self, worker: Worker) -> None:
        while not worker.ever_ready:
            await self._clock.sleep(READY_POLL)

    async def _keep(self, worker: Worker) -> None:
        """Run `worker`, restarting it when it dies after it was ready; WorkerFailed when it dies before."""

        async def life() -> int:
            proc = await self._start(worker)
            watcher = asyncio.create_task(self._watch_ready(worker))
            try:
                code = await proc.wait()
            finally:
                watcher.cancel()
            if not worker.ever_ready:
                raise WorkerFailed(f"worker {worker.index} exited with code {code} during start-up")
            return code

        def exited(code: int, delay: float) -> None:
            worker.restarts += 1
            log.warning("apiserver worker exited; restarting", worker=worker.index, code=code, delay=delay)

        try:
            await keep_restarting(life, policy=RESTART_BACKOFF, clock=self._clock, on_exit=exited)
        finally:
            await self._stop(worker)

    async def _start(self, worker: Worker) -> asyncio.subprocess.Process:
        parent = os.getpid()
        worker.proc = await asyncio.create_subprocess_exec(
            *worker.argv, stdin=asyncio.subprocess.DEVNULL, preexec_fn=die_with_parent(parent)
        )
        log.info("apiserver worker started", worker=worker.index, pid=worker.proc.pid)
        return worker.proc

    async def _watch_ready(self, worker: Worker) -> None:
        while not await worker.probe.ready():
            await self._clock.sleep(READY_POLL)
        worker.ever_ready = True

    async def _stop(self, worker: Worker) -> None:
        """SIGTERM, then SIGKILL after the grace and `STOP_MARGIN`; returns once the process is gone."""
        proc = worker.proc
        if await stop_process(proc, grace=self._grace + STOP_MARGIN):
            log.warning("apiserver worker ignored SIGTERM; killed it", worker=worker.index, pid=proc and proc.pid)


__all__ = ["STOP_MARGIN", "Worker", "WorkerFailed", "WorkerSupervisor", "worker_argv"]
