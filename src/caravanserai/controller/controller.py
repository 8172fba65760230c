"""A Controller: reconcile workers taking keys from a work queue and calling a `Reconciler`.

    controller = Controller("ttl", TTLReconciler(...))
    controller.watch(projects)                                   # a project change → its name
    controller.watch(nodes, enqueue_mapped(pending_projects))    # a node change → the projects it concerns
    manager.add(controller)

Guarantees:

* `max_concurrent_reconciles` reconcile workers (default 1) share one queue: different keys run in parallel, one
  key never twice at once (the queue is stingy).
* The outcome of each reconcile is handled as `caravanserai.controller.reconcile` describes: forget, add_after,
  add_rate_limited, or log-and-forget for `TerminalError`. Any exception is caught (CancelledError excepted),
  so a bug in one reconcile never stops the workers.
* `run()` first adds a key for every object cached by the watched informers (level-based: after a restart or a
  leadership change nothing depends on events seen earlier), then runs the workers. It returns when the queue
  is shut down and the workers are done; when cancelled, in-flight reconciles are cancelled and their keys are
  released (done), so the controller can run again later on the same queue.
* Handlers keep adding keys while the controller is not running (e.g. not leading): the queue collapses them,
  and they are processed once it runs.
* **No reconcile starts while `may_act()` is False** (the manager sets it to `Manager.leading`: under leader
  election, the lease renewed within its deadline). A worker that takes a key then holds it, checking every
  `MAY_ACT_POLL` seconds, until `may_act()` is True again or the worker is cancelled (the elector cancels the
  controllers once it sees the deadline passed; the key is then released and primed again under the next lease).
  So between the renew deadline and that cancellation, which may come up to the elector's retry period later,
  nothing new is started on a lease that another replica may already hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from caravanserai.clock import Clock, SystemClock
from caravanserai.controller.handlers import HandlerFactory, enqueue_object
from caravanserai.controller.metrics import ControllerMetrics
from caravanserai.controller.reconcile import Reconciler, Result
from caravanserai.errors import ApiError, TerminalError
from caravanserai.informer import EventHandler, Informer
from caravanserai.workqueue import RateLimiter, ShutDown, WorkQueue

log = structlog.get_logger(__name__)

MAY_ACT_POLL = 0.05
"""Seconds between two looks at `may_act()` of a worker holding a key it may not reconcile yet."""


class Controller:
    """Runs a Reconciler over the keys its watched informers produce. See the module docstring."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        queue: WorkQueue[str] | None = None,
        *,
        max_concurrent_reconciles: int = 1,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError(f"max_concurrent_reconciles must be at least 1, not {max_concurrent_reconciles}")
        self.name = name
        self.reconciler = reconciler
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self._clock: Clock = clock or SystemClock()
        self.metrics = metrics or ControllerMetrics(name)
        # A queue made here reports its numbers to `metrics`, and so does a queue passed in with the `metrics` it
        # reports to (`WorkQueue(metrics=metrics.queue)`, made first so that parts built before the controller can
        # add keys); for any other queue passed in, the controller counts its own retries and the manager samples
        # the depth (adds and latencies stay with the queue's own hooks).
        self._queue_reports = queue is None or metrics is not None
        if queue is None:  # (not `queue or …`: an empty queue is falsy)
            queue = WorkQueue(clock=self._clock, rate_limiter=rate_limiter, metrics=self.metrics.queue)
        self.queue: WorkQueue[str] = queue
        # The informers this controller watches, each with the handler that turns its changes into keys.
        self._sources: list[tuple[Informer[Any], EventHandler[Any]]] = []
        self.may_act: Callable[[], bool] = lambda: True  # whether a reconcile may start now (see the docstring)
        self._log = log.bind(controller=name)

    @property
    def informers(self) -> list[Informer[Any]]:
        """The informers this controller watches (the manager waits for them to sync)."""
        return [informer for informer, _ in self._sources]

    def watch(self, informer: Informer[Any], handler: HandlerFactory = enqueue_object) -> None:
        """Reconcile the keys `handler` derives from `informer`'s changes (default: the object's name)."""
        event_handler = handler(self.queue)
        informer.add_event_handler(event_handler)
        self._sources.append((informer, event_handler))

    def enqueue(self, key: str) -> None:
        """Ask for `key` to be reconciled."""
        self.queue.add(key)

    async def run(self) -> None:
        """Run the workers until the queue is shut down (returns) or the controller is cancelled (raises)."""
        self._prime()
        self._log.info("controller starting", workers=self.max_concurrent_reconciles)
        async with asyncio.TaskGroup() as group:
            for index in range(self.max_concurrent_reconciles):
                group.create_task(self._worker(), name=f"controller-{self.name}-worker-{index}")
        self._log.info("controller stopped")

    async def shut_down(self, *, drain: bool = True) -> None:
        """Stop taking new keys; with `drain`, wait until queued and in-flight keys are done."""
        await self.queue.shut_down(drain=drain)

    def _prime(self) -> None:
        for informer, handler in self._sources:
            if handler.on_add is not None:
                for obj in informer.list():
                    handler.on_add(obj)

    async def _worker(self) -> None:
        while True:
            try:
                async with self.queue.get() as key:
                    while not self.may_act():
                        await self._clock.sleep(MAY_ACT_POLL)
                    await self._reconcile(key)
            except ShutDown:
                return

    async def _reconcile(self, key: str) -> None:
        started = self._clock.monotonic()
        self.metrics.active_workers += 1
        try:
            result = await self.reconciler.reconcile(key)
        except TerminalError as exc:
            self._log.error("reconcile failed terminally; not retrying", key=key, error=str(exc))
            self.queue.forget(key)
            self._record("terminal", started)
            return
        except Exception as exc:  # noqa: BLE001 - any failure is retried with backoff
            self._log.warning(
                "reconcile failed; retrying",
                key=key,
                error=f"{type(exc).__name__}: {exc}",
                retries=self.queue.num_requeues(key),
                exc_info=not _expected(exc),
            )
            self.queue.add_rate_limited(key)
            if not self._queue_reports:
                self.metrics.queue.retried(key)
            self._record("error", started)
            return
        finally:
            self.metrics.active_workers -= 1
        self._handle_result(key, result or Result(), started)

    def _handle_result(self, key: str, result: Result, started: float) -> None:
        self.queue.forget(key)
        if result.requeue_after is None:
            self._record("success", started)
            return
        self.queue.add_after(key, result.requeue_after)
        self._record("requeue_after", started)

    def _record(self, outcome: str, started: float) -> None:
        self.metrics.reconciled(outcome, self._clock.monotonic() - started)
        if not self._queue_reports:
            self.metrics.queue.depth(len(self.queue))


def _expected(exc: Exception) -> bool:
    """Errors that are part of normal operation (no traceback in the log): API refusals and outages."""
    return isinstance(exc, ApiError)


__all__ = ["Controller"]
