"""Periodic compaction of etcd's history, coordinated between apiservers: `await Compactor(...).run()`.

etcd keeps every revision of every key until someone compacts it: without compaction its database (and its
memory: the database is mapped into it) grows with every write, forever. Every apiserver runs one `Compactor`;
together they compact about once per interval, whatever their number.

* **Once per interval, whoever ticks first.** Each tick is one etcd transaction on the compaction key
  (`compaction_key(prefix)`): if the key's version is the one this apiserver last saw, it writes the target
  revision there (bumping the version) and compacts; otherwise it only learns the new version (and the revision
  another apiserver compacted to). An apiserver that lost a round is in step again for the next one, so with N
  apiservers on the same interval exactly one compacts per interval (the Kubernetes apiserver's scheme).
* **A retention window of one interval.** The target of a tick is the store revision this apiserver saw at its
  previous tick, so everything written during the last interval stays: a watcher or a list that is up to one
  interval behind resumes without relisting. The first tick after a start only records the revision.
* **Best effort.** A tick that fails (etcd unreachable, ambiguous outcome) is logged and the next one starts
  again from what etcd says: at worst one interval passes without compaction.
* **Tells the caller.** `on_compacted(revision)` runs with every compaction this apiserver performs or learns of
  (the watch caches drop history older than it: events a client could no longer resume from at any apiserver).

The database file does not shrink by compaction (freed pages are reused); only defragmentation
(`etcdctl defrag`, docs/fleet.md) gives the space back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from caravanserai.clock import Clock
from caravanserai.errors import ApiError
from caravanserai.storage.etcd import EtcdClient
from caravanserai.storage.etcd_types import Compare, PutOp, RangeOp, RangeResult

log = structlog.get_logger(__name__)


def compaction_key(prefix: str) -> bytes:
    """The key the apiservers of one etcd prefix coordinate compaction through (beside the resources' keys,
    never inside one: those are `<prefix>/<resource>/<name>`). Its value is the last revision compacted to."""
    return f"{prefix.rstrip('/')}/compaction".encode()


@dataclass(frozen=True, slots=True)
class Round:
    """What one tick ended with: the compaction key's version now known, the store revision at the tick (the
    next tick's target) and the revision compacted to in this round (0: none)."""

    version: int
    revision: int
    compacted: int


class Compactor:
    """Compacts etcd every `interval` seconds (see the module docstring): `client` runs the rounds' transactions,
    `compact(revision)` the compaction itself (`Store.compact`: already compacted past it is not an error)."""

    def __init__(
        self,
        client: EtcdClient,
        *,
        compact: Callable[[int], Awaitable[None]],
        prefix: str,
        interval: float,
        clock: Clock,
        on_compacted: Callable[[int], None] = lambda _: None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"compaction interval must be positive, got {interval}")
        self._client = client
        self._compact = compact  # `Store.compact` (idempotent; timed by the apiserver's metrics)
        self._key = compaction_key(prefix)
        self._interval = interval
        self._clock = clock
        self._on_compacted = on_compacted

    async def run(self) -> None:
        """Tick every interval until cancelled."""
        last = Round(version=0, revision=0, compacted=0)
        while True:
            await self._clock.sleep(self._interval)
            try:
                last = await self.tick(last.version, last.revision)
            except ApiError as exc:
                log.warning("compaction failed; the next interval tries again", error=str(exc))

    async def tick(self, version: int, target: int) -> Round:
        """One round: claim it when the compaction key is still at `version` and compact to `target` (if any),
        or learn the round another apiserver claimed."""
        result = await self._client.txn(
            [Compare.version(self._key, "==", version)],
            [PutOp(self._key, str(target).encode())],
            [RangeOp(self._key)],
        )
        if not result.succeeded:
            current = result.responses[0]
            if not isinstance(current, RangeResult) or not current.kvs:  # deleted meanwhile: claim the next round
                return Round(version=0, revision=result.revision, compacted=0)
            kv = current.kvs[0]
            compacted = _revision(kv.value)
            if compacted:
                self._on_compacted(compacted)
            return Round(version=kv.version, revision=result.revision, compacted=0)
        if target:
            await self._compact(target)
            log.info("compacted etcd", revision=target)
            self._on_compacted(target)
        return Round(version=version + 1, revision=result.revision, compacted=target)


def _revision(value: bytes) -> int:
    try:
        return int(value)
    except ValueError:
        return 0


__all__ = ["Compactor", "Round", "compaction_key"]
