"""The `Scheduled` event of each binding, written by a controller of its own, after the binding.

A binding is the scheduler's critical path; its Normal `Scheduled` event ("Successfully assigned web to node-1")
is a report. So the reconciler only notes the event (`BoundEvents.note`, no await) and this controller's few
workers write it through the `EventRecorder`: a burst of bindings is never held up by its reports, which follow
as the API server has room (kube-scheduler's events are asynchronous for the same reason). The reports that say
why a project is still Pending (the Unschedulable condition, the FailedScheduling Warning) are not deferred:
the reconciler writes them itself.

Guarantees:

* **Every binding this replica made gets its event**, in binding order (the queue is FIFO), written once. The
  event names the project at the version the binding produced; its message is the one given at `note` (the
  estimates' reason, `estimates.bound_message`) or "Successfully assigned web to node-1". Two bindings of one
  project before the first event is written (bound, moved back to Pending, bound again) leave one event, for the
  later binding.
* **Capped.** At most `max_pending` events wait (each a name, uid, version and message, not a whole project); a
  binding beyond that gets no event, and a warning with the number dropped so far is logged.
* **Best effort, like every event.** A refused write is logged by the recorder and not retried; events still
  waiting when this replica stops leading are written when it leads again (they stay true: the bindings were
  made), or never, if the process stops first.
"""

from __future__ import annotations

import structlog

from caravanserai import meta, v1
from caravanserai.controller import EventRecorder, Result
from caravanserai.controllers.scheduler import conditions
from caravanserai.workqueue import WorkQueue

log = structlog.get_logger(__name__)

DEFAULT_MAX_PENDING = 50_000
EVENT_RECONCILE_WORKERS = 4
"""Events written concurrently: enough to keep up with steady binding rates, few enough to leave the API server
to the bindings during a burst."""


class BoundEvents:
    """The reconciler of the `scheduler-events` controller: keys are project keys ("namespace/name") with an event
    to write."""

    def __init__(
        self, recorder: EventRecorder, queue: WorkQueue[str], *, max_pending: int = DEFAULT_MAX_PENDING
    ) -> None:
        self._recorder = recorder
        self.queue = queue
        self._max_pending = max_pending
        # key → (the bound project's reference, node, the message when it is not the plain one)
        self._pending: dict[str, tuple[v1.Project, str, str | None]] = {}
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._pending)

    def note(self, stored: v1.Project, node: str, message: str | None = None) -> None:
        """`stored` (the project as the binding wrote it) was bound to `node`: announce it soon, with `message`
        (None: "Successfully assigned …")."""
        name = meta.key_of(stored)
        if name not in self._pending and len(self._pending) >= self._max_pending:
            self.dropped += 1
            log.warning("too many Scheduled events waiting; this one is not written", project=name,
                        waiting=len(self._pending), dropped=self.dropped)  # fmt: skip
            return
        reference = v1.Project()
        reference.metadata.name = stored.metadata.name
        reference.metadata.namespace = stored.metadata.namespace
        reference.metadata.uid = stored.metadata.uid
        reference.metadata.resource_version = stored.metadata.resource_version
        self._pending[name] = (reference, node, message)
        self.queue.add(name)

    async def reconcile(self, key: str) -> Result:
        noted = self._pending.pop(key, None)
        if noted is not None:
            project, node, message = noted
            await self._recorder.normal(
                project, conditions.EVENT_SCHEDULED, message or scheduled_message(project.metadata.name, node)
            )
        return Result()


def scheduled_message(project: str, node: str) -> str:
    return f"Successfully assigned {project} to {node}"


__all__ = ["BoundEvents", "DEFAULT_MAX_PENDING", "EVENT_RECONCILE_WORKERS", "scheduled_message"]
