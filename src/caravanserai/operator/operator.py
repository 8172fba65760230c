"""`Operator`: handlers per kind, registered with decorators, run by a `Reconciler` the controller library drives.

    backups = Operator("backup", Backup, client, clock=clock)

    @backups.on_create()
    async def scheduled(ctx: Context[Backup]) -> None: ...

    @backups.timer(interval=lambda b: b.spec.interval)          # every spec.interval seconds, per Backup
    async def run(ctx: Context[Backup]) -> None: ...

    @backups.on_delete()                                       # adds a finalizer; removed after it succeeds
    async def cleanup(ctx: Context[Backup]) -> None: ...

    backups.setup(manager)                                     # an informer, a Controller, added to the manager

Guarantees (each reconcile of one object; one object is never reconciled twice at once, as for every Controller):

* The object is read from the server (a linearizable Get), never from a possibly stale cache.
* **Deleting** (deletionTimestamp set): the delete handlers run; once all are done the finalizer is removed (the
  object then goes). Timers and daemons of the object stop at once. A gone object stops them too.
* **Finalizer first.** With delete handlers registered, the finalizer (`finalizer`, default
  `operator.caravanserai.io/<name>`) is added before any other handler runs, so whatever a create handler made
  is cleaned up.
* **Change handlers** run in registration order: create handlers for an object never handled, update handlers
  for one whose spec, labels or annotations changed since it was last handled, resume handlers once per process
  for an object handled before (the operator restarted). Filters (`when=`) choose among them. When all are done,
  the handled state is recorded in the annotation `operator.caravanserai.io/last-handled-<name>`, so the next
  reconcile (also after a restart) calls none of them for the same state. An operator without change handlers
  records nothing (its objects carry no annotation of it).
* **Retries without a traceback:** see `caravanserai.operator.errors`. Handlers that finished are not called
  again while the others of the same change retry (progress is kept in memory; a restart runs them again, so
  handlers are idempotent).
* **Timers** run per object every `interval` seconds (a number or a function of the object, e.g. `spec.interval`),
  the first after `initial_delay`, only once the change handlers are done; the schedule is in memory (a restart
  or a new leader starts it again). A timer's error postpones its next run by the error's delay. An interval of
  0 or less turns the timer off for that object (never a busy loop).
* **Level handlers** (`on_reconcile`) run at every reconcile of a live object, after the change handlers are
  done (a change of the object, of a dependent it `owns`, a requeue): they converge the world to the object's
  state, so they must be idempotent. `Requeue(after=s)` or `TemporaryError(delay=s)` reconciles again after `s`.
* **Dependents** (`owns(kind)`): a change of an object of `kind` whose controller ownerReference names this kind
  reconciles its owner (the reference's name is the key; an owner of a namespaced kind is looked up in the
  dependent's namespace), as controller-runtime's `Owns`.
* **Retired finalizers** (`retired_finalizers=`, those of earlier versions of the operator) are removed on sight,
  also from an object being deleted, before anything else.
* **Status:** handlers change `ctx.status`; after them it is written through the status subresource when it
  differs, read again and written again on Conflict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import structlog

from caravanserai import meta
from caravanserai.clock import Clock, SystemClock
from caravanserai.controller import Controller, Manager, Result, enqueue_mapped
from caravanserai.errors import NotFound
from caravanserai.operator import essence, writes
from caravanserai.operator.context import CREATE, DAEMON, DELETE, RECONCILE, RESUME, TIMER, UPDATE, Context
from caravanserai.operator.daemons import Daemons
from caravanserai.operator.filters import Filter, all_pass
from caravanserai.operator.handlers import Handler, HandlerFn, Interval, Outcome, call

log = structlog.get_logger(__name__)

T = TypeVar("T")
Filters = Filter | Iterable[Filter] | None
FINALIZER_PREFIX = "operator.caravanserai.io/"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?")  # fits the annotation key's 63-character name part


class Operator(Generic[T]):
    """The handlers of one kind and the reconciler that runs them. See the module docstring."""

    def __init__(
        self,
        name: str,
        kind: type[T],
        client: Any,
        *,
        clock: Clock | None = None,
        finalizer: str = "",
        retired_finalizers: Iterable[str] = (),
    ) -> None:
        if not _NAME.fullmatch(name):
            raise ValueError(f"operator name {name!r}: 1–50 lowercase letters, digits and '-' (it names a finalizer)")
        self.name = name
        self.kind = kind
        self.client = client
        self.resource = client.resource(kind)
        self.clock: Clock = clock or SystemClock()
        self.finalizer = finalizer or FINALIZER_PREFIX + name
        self.annotation = essence.annotation_key(name)
        self.retired_finalizers = tuple(retired_finalizers)
        self._group = _group(self.resource.kind.api_version)
        self.owned: list[type[Any] | str] = []  # kinds of dependents whose changes reconcile their owner
        self.handlers: list[Handler] = []
        self.daemons = Daemons(name, self.clock)
        self._resumed: set[str] = set()  # uids seen by this process
        self._uids: dict[str, str] = {}  # object key → uid last seen
        self._progress: dict[tuple[str, str], set[str]] = {}  # (uid, state) → ids of handlers done
        self._timers: dict[tuple[str, str], float] = {}  # (uid, timer id) → monotonic time of its next run
        self._log = log.bind(operator=name)

    # ---- registering ------------------------------------------------------------------------------------------

    def _register(self, reason: str, *, when: Filters, id: str, **extra: Any) -> Callable[[HandlerFn], HandlerFn]:
        def decorator(fn: HandlerFn) -> HandlerFn:
            hid = id or getattr(fn, "__name__", reason)
            if any(h.id == hid for h in self.handlers):
                raise ValueError(f"operator {self.name!r} already has a handler {hid!r}")
            self.handlers.append(Handler(reason, hid, fn, all_pass(when), **extra))
            return fn

        return decorator

    def on_create(self, *, when: Filters = None, id: str = "") -> Callable[[HandlerFn], HandlerFn]:
        """Register a handler for objects never handled (`id`: default the function's name)."""
        return self._register(CREATE, when=when, id=id)

    def on_update(self, *, when: Filters = None, id: str = "") -> Callable[[HandlerFn], HandlerFn]:
        """Register a handler for objects whose spec, labels or annotations changed since last handled."""
        return self._register(UPDATE, when=when, id=id)

    def on_resume(self, *, when: Filters = None, id: str = "") -> Callable[[HandlerFn], HandlerFn]:
        """Register a handler run once per process for each object handled before (after a restart)."""
        return self._register(RESUME, when=when, id=id)

    def on_delete(self, *, when: Filters = None, id: str = "") -> Callable[[HandlerFn], HandlerFn]:
        """Register a handler for objects being deleted; the operator's finalizer holds them until it is done."""
        return self._register(DELETE, when=when, id=id)

    def timer(
        self, *, interval: Interval, initial_delay: float = 0.0, when: Filters = None, id: str = ""
    ) -> Callable[[HandlerFn], HandlerFn]:
        """Register a timer run every `interval` seconds per object (a number or a function of the object), the
        first `initial_delay` seconds after the object is first reconciled."""
        return self._register(TIMER, when=when, id=id, interval=interval, initial_delay=initial_delay)

    def daemon(
        self, *, when: Filters = None, id: str = "", restart_after: float = 10.0
    ) -> Callable[[HandlerFn], HandlerFn]:
        """Register a daemon: a coroutine run per object while it exists (see `caravanserai.operator.daemons`)."""
        return self._register(DAEMON, when=when, id=id, initial_delay=restart_after)

    def on_reconcile(self, *, when: Filters = None, id: str = "") -> Callable[[HandlerFn], HandlerFn]:
        """Register a level handler: run at every reconcile of a live object once the change handlers are done."""
        return self._register(RECONCILE, when=when, id=id)

    def owns(self, kind: type[Any] | str) -> None:
        """Reconcile the owner when a dependent of `kind` (a class or a resource name) changes: the dependent's
        controller ownerReference naming this operator's kind gives the owner's key (see `owner_keys`)."""
        if kind not in self.owned:
            self.owned.append(kind)

    def owner_keys(self, dependent: Any) -> list[str]:
        """The key of the object of this kind that controls `dependent` (its controller reference), if any: an owner
        of a namespaced kind is in the dependent's namespace (as in Kubernetes)."""
        ref = meta.controller_of(dependent)
        if ref is None or ref.kind != self.resource.kind.kind or _group(ref.api_version) != self._group:
            return []
        if self.resource.kind.cluster_scoped:
            return [ref.name]
        return [meta.join_key(meta.namespace_of(dependent), ref.name)]

    def _of(self, *reasons: str) -> list[Handler]:
        return [h for h in self.handlers if h.reason in reasons]

    # ---- running ----------------------------------------------------------------------------------------------

    def setup(self, manager: Manager, *, max_concurrent_reconciles: int = 1) -> Controller:
        """Add a controller running this operator to `manager` (an informer on the kind triggers reconciles)."""
        informer = manager.informers.informer(self.resource.kind.plural)
        controller = OperatorController(self, max_concurrent_reconciles=max_concurrent_reconciles, clock=self.clock)
        controller.watch(informer)
        for kind in self.owned:
            controller.watch(manager.informers.informer(kind), enqueue_mapped(self.owner_keys))
        manager.add(controller)
        return controller

    async def close(self) -> None:
        """Stop every daemon (the controller does it when it stops; unit tests call it)."""
        await self.daemons.stop_all()

    async def reconcile(self, key: str) -> Result:
        """Run the handlers due for object `key` (the `Reconciler` contract)."""
        try:
            obj = await self.resource.get(key)
        except NotFound:
            await self._forget(key, None)
            return Result()
        if any(f in obj.metadata.finalizers for f in self.retired_finalizers):
            obj = await writes.modify(self.resource, obj, self._drop_retired)
            if obj is None:
                return Result()
        if obj.metadata.HasField("deletion_timestamp"):
            await self._forget(key, obj.metadata.uid)
            return await self._finalize(obj)
        if self._of(DELETE) and self.finalizer not in obj.metadata.finalizers:
            obj = await writes.modify(self.resource, obj, self._add_finalizer)
            if obj is None:
                return Result()
        return await self._handle(obj)

    async def _forget(self, key: str, uid: str | None) -> None:
        """Stop the daemons and timers of object `key` (being deleted, or gone: then its last known uid)."""
        await self.daemons.stop(key)
        uid = uid or self._uids.pop(key, None)
        if uid is None:
            return
        self._timers = {k: v for k, v in self._timers.items() if k[0] != uid}
        if key not in self._uids:  # gone: nothing of it is needed any more
            self._progress = {k: v for k, v in self._progress.items() if k[0] != uid}
            self._resumed.discard(uid)

    def _add_finalizer(self, obj: Any) -> bool:
        if self.finalizer in obj.metadata.finalizers:
            return False
        obj.metadata.finalizers.append(self.finalizer)
        return True

    def _drop_retired(self, obj: Any) -> bool:
        retired = [f for f in obj.metadata.finalizers if f in self.retired_finalizers]
        for finalizer in retired:
            obj.metadata.finalizers.remove(finalizer)
        return bool(retired)

    def _remove_finalizer(self, obj: Any) -> bool:
        if self.finalizer not in obj.metadata.finalizers:
            return False
        obj.metadata.finalizers.remove(self.finalizer)
        return True

    def _context(self, reason: str, obj: Any, status: Any, old: Any, new: Any) -> Context[Any]:
        return Context(reason, obj, status, self.client, self.clock.now(), old, new, essence.diff(old, new))

    async def _run(self, handlers: list[Handler], ctx: Context[Any], state: str) -> Outcome:
        """Run the not yet done `handlers` whose filters pass; done when all are, else the earliest retry."""
        done = self._progress.setdefault((ctx.obj.metadata.uid, state), set())
        retry: float | None = None
        for handler in handlers:
            if handler.id in done or not handler.when(ctx):
                continue
            ctx.reason = handler.reason
            outcome = await call(handler, ctx, operator=self.name)
            if outcome.done:
                done.add(handler.id)
            else:
                retry = outcome.retry_after if retry is None else min(retry, outcome.retry_after or 0.0)
        if retry is not None:
            return Outcome(done=False, retry_after=retry)
        self._progress.pop((ctx.obj.metadata.uid, state), None)
        return Outcome(done=True)

    async def _finalize(self, obj: Any) -> Result:
        if self.finalizer not in obj.metadata.finalizers:
            return Result()
        ctx = self._context(DELETE, meta.copy(obj), meta.copy(obj.status), None, {})
        outcome = await self._run(self._of(DELETE), ctx, "delete")
        if not outcome.done:
            return Result(requeue_after=outcome.retry_after)
        await writes.modify(self.resource, obj, self._remove_finalizer)
        self._log.info("finalized", object=meta.key_of(obj))
        return Result()

    async def _handle(self, obj: Any) -> Result:
        uid = self._uids[meta.key_of(obj)] = obj.metadata.uid
        old = essence.decode(obj.metadata.annotations.get(self.annotation, ""))
        new = essence.essence_of(obj, ignore=self.annotation)
        due: list[Handler] = []
        if old is None:
            due = self._of(CREATE)
        else:
            if uid not in self._resumed:
                due += self._of(RESUME)
            if essence.diff(old, new) or old.get("generation") != new.get("generation"):
                due += self._of(UPDATE)
        ctx = self._context(CREATE if old is None else UPDATE, meta.copy(obj), meta.copy(obj.status), old, new)
        outcome = await self._run(due, ctx, essence.encode(new))
        if not outcome.done:
            await self._write_status(obj, ctx.status)
            return Result(requeue_after=outcome.retry_after)
        self._resumed.add(uid)  # only now: resume handlers that failed are due again
        await self._ensure_daemons(ctx)
        next_timer = await self._run_timers(ctx)
        again = await self._run_level(ctx)
        stored = await self._write_status(obj, ctx.status)
        if stored is not None and old != new and self._of(CREATE, UPDATE, RESUME):  # only change handlers need it
            await writes.modify(self.resource, stored, lambda o: self._record(o, new))
        soonest = [s for s in (next_timer, again) if s is not None]
        return Result(requeue_after=min(soonest) if soonest else None)

    def _record(self, obj: Any, handled: essence.Essence) -> bool:
        if essence.decode(obj.metadata.annotations.get(self.annotation, "")) == handled:
            return False
        obj.metadata.annotations[self.annotation] = essence.encode(handled)
        return True

    async def _write_status(self, obj: Any, status: Any) -> Any | None:
        return await writes.write_status(self.resource, obj, status)

    async def _ensure_daemons(self, ctx: Context[Any]) -> None:
        for handler in self._of(DAEMON):
            if not handler.when(ctx):
                await self.daemons.stop(ctx.key, handler.id)
                continue
            status = meta.copy(ctx.status)  # the daemon's own: the reconcile's status is written without it
            self.daemons.ensure(handler, Context(DAEMON, ctx.obj, status, self.client, ctx.now, ctx.old, ctx.new))

    async def _run_level(self, ctx: Context[Any]) -> float | None:
        """Run the level handlers whose filters pass; seconds until a reconcile is asked again (None: not asked)."""
        again: float | None = None
        for handler in self._of(RECONCILE):
            if not handler.when(ctx):
                continue
            ctx.reason = RECONCILE
            outcome = await call(handler, ctx, operator=self.name)
            if outcome.retry_after is not None:
                again = outcome.retry_after if again is None else min(again, outcome.retry_after)
        return again

    async def _run_timers(self, ctx: Context[Any]) -> float | None:
        """Run the due timers of the object; seconds until the next one is due (None: no timer)."""
        uid, now = ctx.obj.metadata.uid, self.clock.monotonic()
        soonest: float | None = None
        for handler in self._of(TIMER):
            key = (uid, handler.id)
            if not handler.when(ctx) or handler.interval_of(ctx.obj) <= 0:  # an interval of 0: the timer is off
                self._timers.pop(key, None)
                continue
            due = self._timers.setdefault(key, now + handler.initial_delay)
            if due <= now:
                ctx.reason = TIMER
                outcome = await call(handler, ctx, operator=self.name)
                wait = outcome.retry_after if outcome.retry_after is not None else handler.interval_of(ctx.obj)
                due = self._timers[key] = self.clock.monotonic() + wait
            remaining = max(due - self.clock.monotonic(), 0.0)
            soonest = remaining if soonest is None else min(soonest, remaining)
        return soonest


def _group(api_version: str) -> str:
    """The group of an apiVersion (`example.com/v1alpha1` → `example.com`): any served version names one owner."""
    return api_version.rpartition("/")[0]


class OperatorController(Controller):
    """The Controller of an `Operator`: stops the operator's daemons whenever it stops running."""

    def __init__(self, operator: Operator[Any], **options: Any) -> None:
        super().__init__(operator.name, operator, **options)
        self.operator = operator

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            await self.operator.close()


__all__ = ["FINALIZER_PREFIX", "Operator", "OperatorController"]
