"""Leader election on a v1.Lease: of all replicas running `LeaderElector.run`, one at a time leads.

    elector = LeaderElector(client, LeaderElectionConfig(name="cara-scheduler"))
    await elector.run(run_controllers)     # run_controllers() runs only while this process leads

The protocol (client-go's, on our Lease through the API):

* **Every write is a compare-and-swap** on the lease's resource_version (create: the name must be free), so two
  candidates can never both believe a write made them leader.
* **Acquire.** A candidate reads the lease every `retry_period` (jittered up to +20 %). It takes the lease when it
  has no holder (released), or when the record has not changed for `lease_duration_seconds` *as measured by the
  candidate's own monotonic clock since it first saw that record* (so clock skew between machines does not
  matter, only their clocks' rates). Taking it writes holder_identity, acquire_time, renew_time and bumps
  lease_transitions.
* **Renew.** The leader rewrites renew_time every `retry_period`. If it sees another holder, or cannot renew
  within `renew_deadline` of its last successful renew (measured from the start of that attempt), it has lost:
  `on_leading` is cancelled at once and has finished before `run` campaigns again. Because renew_deadline <
  lease_duration, the old leader has stopped before any other candidate can take over.
* **Release.** When `on_leading` returns (a graceful stop), the lease is released (holder cleared) so a standby
  takes over at once instead of after a lease duration. The release is given at most `release_timeout` (2 s): a
  shutdown while the API is unreachable does not wait for it, and the lease then expires by itself after
  `lease_duration`.
* Times written into the lease (renew_time, acquire_time) come from the injected clock's `now()`; expiry and
  sleeps use its `monotonic()` and `sleep()`.

As client-go warns, a lease is not a fence: a paused leader may act a moment after losing. Controllers stay
safe because every write they make is itself a compare-and-swap on the objects they change; a write that spends
something the objects do not record (a node's free capacity, decided from a cache) also asks `holds_lease()` just
before it: a process that was paused past its renew deadline wakes up knowing it may no longer act, before the
renewer has had its turn to cancel the work.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
from google.protobuf.timestamp_pb2 import Timestamp

from caravanserai import meta, v1
from caravanserai.backoff import Backoff
from caravanserai.client import Client
from caravanserai.clock import Clock, SystemClock, run_within, timestamp
from caravanserai.errors import ApiError, Conflict, NotFound

log = structlog.get_logger(__name__)

JITTER = 1.2


def default_identity() -> str:
    """`<hostname>_<pid>_<6 random hex digits>`: unique per process, readable in `caractrl get leases`."""
    return f"{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Which lease to compete for, as whom, and the timings (controller-runtime's defaults: 15 s / 10 s / 2 s)."""

    name: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_timeout: float = 2.0  # a graceful release not done by then is abandoned (the lease expires by itself)

    def __post_init__(self) -> None:
        if self.release_timeout <= 0:
            raise ValueError(f"leader election needs release_timeout > 0, got {self.release_timeout:g}")
        if not self.lease_duration > self.renew_deadline > self.retry_period * JITTER:
            raise ValueError(
                "leader election needs lease_duration > renew_deadline > retry_period × 1.2, got "
                f"{self.lease_duration:g} / {self.renew_deadline:g} / {self.retry_period:g}"
            )

    @property
    def lease_duration_seconds(self) -> int:
        return max(1, math.ceil(self.lease_duration))


class LeaderElector:
    """Competes for one lease; runs a callback only while holding it. See the module docstring."""

    def __init__(self, client: Client, config: LeaderElectionConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self._leases = client.leases
        self._clock: Clock = clock or SystemClock()
        # The lease record last read or written, and when (monotonic) we first saw that version of it.
        self._observed: v1.Lease | None = None
        self._observed_at = 0.0
        self.is_leader = False
        self.last_renew = float("-inf")  # monotonic start of the last successful acquire or renew
        self._log = log.bind(lease=config.name, identity=config.identity)

    @property
    def holder(self) -> str:
        """The holder identity of the lease as last observed ("" if none)."""
        return self._observed.spec.holder_identity if self._observed is not None else ""

    def holds_lease(self) -> bool:
        """Whether this process may still act as leader now: it leads and its last successful renew started less
        than `renew_deadline` ago by the monotonic clock (after a pause, False at once, with no request)."""
        return self.is_leader and self._clock.monotonic() - self.last_renew < self.config.renew_deadline

    async def run(self, on_leading: Callable[[], Awaitable[object]]) -> None:
        """Campaign; while leading, run `on_leading()`; when lost, cancel it and campaign again.

        Returns after `on_leading()` returns by itself (the lease is then released). Raises what it raises.
        """
        while True:
            await self._acquire()
            if await self._lead(on_leading):
                await self.release()
                return

    async def _acquire(self) -> None:
        self._log.info("waiting to acquire the lease")
        period = self.config.retry_period  # a constant delay (factor 1), jittered up to +20 %
        retry = Backoff(initial=period, factor=1.0, cap=period, jitter=JITTER - 1.0, reset_after=None).start(
            self._clock
        )
        while True:
            started = self._clock.monotonic()
            if await self._attempt(self.config.renew_deadline):
                self.last_renew = started
                self._log.info("acquired the lease; leading")
                return
            await retry.wait()

    async def _lead(self, on_leading: Callable[[], Awaitable[object]]) -> bool:
        """Run `on_leading` while renewing; True when it returned by itself, False when the lease was lost."""
        self.is_leader = True
        work = asyncio.ensure_future(on_leading())
        renewer = asyncio.ensure_future(self._renew_until_lost())
        try:
            await asyncio.wait({work, renewer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Stop the work first and wait until it has stopped: only then are we no longer acting as leader.
            for task in (work, renewer):
                task.cancel()
            await asyncio.wait({work, renewer})
            self.is_leader = False
        if not work.cancelled():
            work.result()  # raises what on_leading raised
            return True
        self._log.warning("lost the lease; stopped leading", holder=self.holder)
        return False

    async def _renew_until_lost(self) -> None:
        cfg = self.config
        while True:
            await self._clock.sleep(cfg.retry_period)
            started = self._clock.monotonic()
            remaining = cfg.renew_deadline - (started - self.last_renew)
            if remaining > 0 and await self._attempt(remaining):
                self.last_renew = started
                continue
            if self.holder not in ("", cfg.identity):
                return  # someone else holds it: lost now
            if self._clock.monotonic() - self.last_renew >= cfg.renew_deadline:
                return  # could not renew in time: lost

    async def _attempt(self, timeout: float) -> bool:
        try:
            return await run_within(self._clock, self._try_acquire_or_renew(), timeout)
        except TimeoutError:
            self._log.debug("lease request timed out")
            return False

    async def _try_acquire_or_renew(self) -> bool:
        """One read and at most one compare-and-swap write. True when we hold the lease afterwards."""
        cfg = self.config
        now = timestamp(self._clock.now())
        try:
            current = await self._leases.get(cfg.name)
        except NotFound:
            return await self._create(now)
        except ApiError as exc:
            self._log.debug("cannot read the lease", error=str(exc))
            return False
        self._observe(current)
        holder = current.spec.holder_identity
        if holder and holder != cfg.identity and not self._expired(current):
            return False
        desired = meta.copy(current)
        if holder != cfg.identity:
            desired.spec.acquire_time.CopyFrom(now)
            desired.spec.lease_transitions = current.spec.lease_transitions + 1
        desired.spec.holder_identity = cfg.identity
        desired.spec.lease_duration_seconds = cfg.lease_duration_seconds
        desired.spec.renew_time.CopyFrom(now)
        try:
            self._observe(await self._leases.update(desired))
        except (Conflict, NotFound):
            return False
        except ApiError as exc:
            self._log.debug("cannot write the lease", error=str(exc))
            return False
        return True

    async def _create(self, now: Timestamp) -> bool:
        cfg = self.config
        lease = meta.with_type_meta(v1.Lease())
        lease.metadata.name = cfg.name
        lease.spec.holder_identity = cfg.identity
        lease.spec.lease_duration_seconds = cfg.lease_duration_seconds
        lease.spec.acquire_time.CopyFrom(now)
        lease.spec.renew_time.CopyFrom(now)
        try:
            self._observe(await self._leases.create(lease))
        except ApiError as exc:  # AlreadyExists: another candidate created it first
            self._log.debug("cannot create the lease", error=str(exc))
            return False
        return True

    def _observe(self, lease: v1.Lease) -> None:
        if self._observed is None or self._observed.metadata.resource_version != lease.metadata.resource_version:
            self._observed = lease
            self._observed_at = self._clock.monotonic()

    def _expired(self, lease: v1.Lease) -> bool:
        return self._clock.monotonic() >= self._observed_at + lease.spec.lease_duration_seconds

    async def release(self) -> bool:
        """Give the lease up if we hold it (holder cleared, compare-and-swap). True when released.

        Gives up after `config.release_timeout` seconds of the clock (the API unreachable, say): False then, and
        the lease expires by itself after its duration."""
        try:
            return await run_within(self._clock, self._release(), self.config.release_timeout)
        except TimeoutError:
            self._log.info(
                "could not release the lease in time; it expires by itself", timeout=self.config.release_timeout
            )
            return False

    async def _release(self) -> bool:
        """Clear the holder by compare-and-swap on a fresh read, retrying on conflict while we still hold it.

        A fresh read matters: a renew cancelled in flight may have been written without our seeing its answer, so
        the version last observed can be one behind."""
        while True:
            try:
                current = await self._leases.get(self.config.name)
            except ApiError as exc:
                self._log.info("could not release the lease", error=str(exc))
                return False
            self._observe(current)
            if current.spec.holder_identity != self.config.identity:
                return False
            released = meta.copy(current)
            released.spec.holder_identity = ""
            released.spec.lease_duration_seconds = 1
            released.spec.renew_time.CopyFrom(timestamp(self._clock.now()))
            try:
                self._observe(await self._leases.update(released))
            except Conflict:
                continue  # renewed or taken meanwhile: read again
            except ApiError as exc:
                self._log.info("could not release the lease", error=str(exc))
                return False
            self._log.info("released the lease")
            return True


__all__ = ["LeaderElectionConfig", "LeaderElector", "default_identity"]
