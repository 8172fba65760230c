"""What the supervisor of `cara-apiserver --workers N` answers on `--metrics-listen`, made from its workers' own
endpoints (each worker serves `/metrics`, `/healthz`, `/readyz` on a Unix socket of its own).

* `/metrics`: every worker's exposition, each sample labelled `worker="<index>"` (a worker that does not answer
  is left out), plus `caravanserai_apiserver_worker_restarts_total{worker}` and
  `caravanserai_apiserver_worker_up{worker}` (1 when the worker answered this scrape). Sum over `worker` for the
  apiserver's totals.
* `/healthz`: 200 when every worker runs and answers its own `/healthz` with 200; 503 naming the first that does
  not (a worker being restarted makes the apiserver unhealthy until it is back).
* `/readyz`: 200 when every worker answers its own `/readyz` with 200; 503 naming the first that does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Protocol

import aiohttp
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

PREFIX = "caravanserai_apiserver"
TIMEOUT = 5.0  # seconds a worker gets to answer one request of the supervisor


class WorkerProbe:
    """HTTP requests to one worker's endpoint on its Unix socket."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    async def get(self, path: str) -> tuple[int, str]:
        """(status, body) of GET `path`; (0, why) when the worker does not answer."""
        try:
            connector = aiohttp.UnixConnector(path=self.socket)
            timeout = aiohttp.ClientTimeout(total=TIMEOUT)
            async with (
                aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
                session.get(f"http://worker{path}") as response,
            ):
                return response.status, await response.text()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return 0, f"does not answer ({exc.__class__.__name__})"

    async def ready(self) -> bool:
        return (await self.get("/readyz"))[0] == 200


class WorkerState(Protocol):
    """What the view reads of a worker (`workers.Worker`)."""

    @property
    def index(self) -> int: ...

    @property
    def probe(self) -> WorkerProbe: ...

    @property
    def restarts(self) -> int: ...

    @property
    def running(self) -> bool: ...


class WorkersView:
    """The three answers over `workers` (the probes of `MetricsEndpoint`)."""

    def __init__(self, workers: Sequence[WorkerState]) -> None:
        self._workers = workers

    async def exposition(self) -> bytes:
        answers = await asyncio.gather(*(w.probe.get("/metrics") for w in self._workers))
        texts = {w.index: body for w, (status, body) in zip(self._workers, answers, strict=True) if status == 200}
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Merged(texts, self._workers))
        return generate_latest(registry)

    async def healthy(self) -> str:
        for worker in self._workers:
            if not worker.running:
                return f"worker {worker.index} is not running"
        return await self._all_answer("/healthz")

    async def ready(self) -> str:
        return await self._all_answer("/readyz")

    async def _all_answer(self, path: str) -> str:
        """ "" when every worker answers `path` with 200, else what the first one that does not said."""
        answers = await asyncio.gather(*(w.probe.get(path) for w in self._workers))
        for worker, (status, body) in zip(self._workers, answers, strict=True):
            if status != 200:
                return f"worker {worker.index}: {body.strip()}"
        return ""


class _Merged(Collector):
    """The workers' families, each sample labelled with its worker, and the supervisor's own."""

    def __init__(self, texts: dict[int, str], workers: Sequence[WorkerState]) -> None:
        self._texts = texts
        self._workers = workers

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for index, text in sorted(self._texts.items()):
            for family in text_string_to_metric_families(text):
                merged = families.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type, family.unit)
                )
                merged.samples.extend(s._replace(labels={**s.labels, "worker": str(index)}) for s in family.samples)
        yield from families.values()
        restarts = CounterMetricFamily(f"{PREFIX}_worker_restarts", "Restarts of each worker.", labels=["worker"])
        up = GaugeMetricFamily(f"{PREFIX}_worker_up", "1 when the worker answered this scrape.", labels=["worker"])
        for worker in self._workers:
            restarts.add_metric([str(worker.index)], worker.restarts)
            up.add_metric([str(worker.index)], 1 if worker.index in self._texts else 0)
        yield restarts
        yield up


__all__ = ["WorkerProbe", "WorkerState", "WorkersView"]
