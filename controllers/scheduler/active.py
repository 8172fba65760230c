"""The priority ordering in front of the scheduler's work queue, and the per-project retry backoff.

Why an ordering in front of the queue: the library's work queue is FIFO (fair), which is right for most
controllers, but a scheduler must place a higher `spec.priority` first however late it arrived. So the work
queue's keys are *wake-ups*: each key handed to a worker means "one decision may be made now", and which project
that decision is for is chosen here, most urgent first. A project joins `ActiveProjects` when it becomes worth
trying (created, changed, a node it might fit on appeared or freed up, its retry delay ran out) and leaves it when
a worker pops it for a decision.

`ActiveProjects` guarantees:

* **Priority order.** `pop()` returns the waiting project with the highest priority; among equals the one
  created first, then by name. Re-adding a waiting project with a new priority re-orders it.
* **Each project once.** A project is in the set at most once; adding it again while it waits changes nothing.
* **O(log n)** add and pop (a heap with lazy deletion), O(1) membership and discard.

`RetryBackoff`: an unschedulable project is retried after 1 s, 2 s, 4 s … capped at 30 s (so it is re-checked at
least every 30 s however little changes), and its count is reset when it leaves Pending. It is not
`caravanserai.backoff` (one loop's reconnect delays): it is per project and also answers whether one is `due`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 30.0
DUE_TOLERANCE = 0.01  # a timer may fire a hair before its deadline

_Entry = tuple[int, float, str]  # (-priority, creation time, name): heap order is urgency


class ActiveProjects:
    """Project names waiting for a scheduling decision, most urgent first. See the module docstring."""

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        # The live entry of each waiting project; heap entries not equal to it are stale and skipped.
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def add(self, name: str, *, priority: int, created: float) -> bool:
        """Let `name` wait for a decision; True when it was not waiting (or waited with another priority)."""
        entry = (-priority, created, name)
        if self._entries.get(name) == entry:
            return False
        self._entries[name] = entry
        heapq.heappush(self._heap, entry)
        self._compact()
        return True

    def discard(self, name: str) -> None:
        """Stop `name` waiting (it was deleted, bound, or is being decided on)."""
        self._entries.pop(name, None)

    def peek(self) -> str | None:
        """The most urgent waiting project, left waiting."""
        self._drop_stale()
        return self._heap[0][2] if self._heap else None

    def pop(self) -> str | None:
        """The most urgent waiting project, which stops waiting; None when nothing waits."""
        self._drop_stale()
        if not self._heap:
            return None
        entry = heapq.heappop(self._heap)
        del self._entries[entry[2]]
        return entry[2]

    def _drop_stale(self) -> None:
        heap, entries = self._heap, self._entries
        while heap and entries.get(heap[0][2]) != heap[0]:
            heapq.heappop(heap)

    def _compact(self) -> None:
        """Rebuild the heap when stale entries outnumber live ones, so memory stays O(waiting projects)."""
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._entries):
            self._heap = list(self._entries.values())
            heapq.heapify(self._heap)


@dataclass(slots=True)
class RetryBackoff:
    """Per-project delays before retrying an unschedulable project: initial · 2ⁿ, capped at `maximum`.

    It also remembers when each project may be tried next (`due`), so a stale wake-up for a project that was
    just tried does not try it again before its delay ends. (Cluster changes wake projects regardless.)
    """

    initial: float = DEFAULT_INITIAL_BACKOFF
    maximum: float = DEFAULT_MAX_BACKOFF
    _failures: dict[str, int] = field(default_factory=dict)
    _not_before: dict[str, float] = field(default_factory=dict)  # monotonic time of the next attempt

    def next_delay(self, name: str, *, now: float = 0.0) -> float:
        """Count one more failed attempt of `name` at monotonic `now`; how long to wait before the next one."""
        failures = self._failures.get(name, 0)
        self._failures[name] = failures + 1
        delay = float(min(self.maximum, self.initial * 2 ** min(failures, 32)))
        self._not_before[name] = now + delay
        return delay

    def due(self, name: str, *, now: float) -> bool:
        """Whether `name` may be tried at monotonic `now` (its delay has run out, or it never failed)."""
        return now + DUE_TOLERANCE >= self._not_before.get(name, now)

    def failures(self, name: str) -> int:
        return self._failures.get(name, 0)

    def reset(self, name: str) -> None:
        """`name` was placed or left Pending: its next failure waits `initial` again."""
        self._failures.pop(name, None)
        self._not_before.pop(name, None)


__all__ = ["ActiveProjects", "DEFAULT_INITIAL_BACKOFF", "DEFAULT_MAX_BACKOFF", "DUE_TOLERANCE", "RetryBackoff"]
