"""Faults injected at random into a running fleet, one at a time, each undone before the next.

Kinds (`KINDS`):

* `kill-etcd`, `kill-apiserver`, `kill-controller`, `kill-agent`: SIGKILL of one such process (no cleanup runs),
  started again on the same data after 1–3 s, as a supervisor (systemd `Restart=always`) would.
* `cut`: a worker's link goes down for longer than the heartbeat timeout (`SoakConfig.cut_for`), then comes back.
  While it is down, the harness's `unreachable` route for the test subnet must keep every harness address off the
  default route: `Network.routes_contained()` is checked during each cut and any escape is recorded.
* `pause`: SIGSTOP of any control-plane process or agent for `SoakConfig.pause_for` seconds, then SIGCONT.

Every fault is recorded as a `FaultEvent` (kind, target, start and end on the run's monotonic clock, what went
wrong undoing it). `FaultInjector.run(until)` starts one every uniform(min, max) seconds (start to start) until
`until` or `max_faults`; when it returns, nothing is cut, paused or down. Kinds are drawn from a shuffled bag
(every kind once, in random order, then a new bag), so even a short run sees each kind; targets are random.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from caravanserai.clock import Clock
from support.fleet import Fleet, HostProcess
from support.soak.config import SoakConfig

KINDS = ("kill-etcd", "kill-apiserver", "kill-controller", "kill-agent", "cut", "pause")
RESTART_AFTER = (1.0, 3.0)


@dataclass(slots=True)
class FaultEvent:
    """One injected fault, on the run's monotonic clock."""

    kind: str
    target: str
    start: float
    end: float = 0.0
    error: str = ""
    escaped_routes: dict[str, str] = field(default_factory=dict)

    def as_dict(self, origin: float) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "target": self.target,
            "at_s": round(self.start - origin, 1),
            "lasted_s": round(self.end - self.start, 1),
        }
        if self.error:
            out["error"] = self.error
        if self.escaped_routes:
            out["escaped_routes"] = self.escaped_routes
        return out


class FaultInjector:
    """See the module docstring. `on_end(event)` is called when each fault has been undone."""

    def __init__(
        self,
        fleet: Fleet,
        config: SoakConfig,
        *,
        clock: Clock,
        rng: random.Random,
        on_end: Callable[[FaultEvent], None] = lambda _: None,
    ) -> None:
        self.fleet = fleet
        self.config = config
        self.clock = clock
        self.rng = rng
        self.on_end = on_end
        self.events: list[FaultEvent] = []
        self.kinds = config.fault_kinds or KINDS
        self._bag: list[str] = []

    def next_kind(self) -> str:
        """The next kind from the bag (refilled, shuffled, when empty)."""
        if not self._bag:
            self._bag = list(self.kinds)
            self.rng.shuffle(self._bag)
        return self._bag.pop()

    async def run(self, until: float) -> None:
        """Faults until `until` (monotonic): each starts uniform(min, max) seconds after the previous one started
        (at once if the previous one lasted longer), the first that long after the call."""
        last = self.clock.monotonic()
        while not (self.config.max_faults and len(self.events) >= self.config.max_faults):
            start = last + self.rng.uniform(*self.config.fault_interval)
            if start >= until:
                return
            await self.clock.sleep(start - self.clock.monotonic())
            last = self.clock.monotonic()
            await self.inject(self.next_kind())

    async def inject(self, kind: str) -> FaultEvent:
        """Inject one fault of `kind` and undo it; the event (also appended to `events`)."""
        target, action = self._pick(kind)
        event = FaultEvent(kind, target, self.clock.monotonic())
        self.events.append(event)
        try:
            await action(event)
        except Exception as exc:  # noqa: BLE001 - a fault that could not be undone is a finding, not a crash
            event.error = f"{type(exc).__name__}: {exc}"
        event.end = self.clock.monotonic()
        self.on_end(event)
        return event

    def _pick(self, kind: str) -> tuple[str, Callable[[FaultEvent], Awaitable[None]]]:
        fleet = self.fleet
        if kind == "kill-etcd":
            member = self.rng.choice(fleet.etcd.members)

            async def restart_member(_: FaultEvent) -> None:
                await member.process.kill()
                await self._pause(RESTART_AFTER)
                await fleet.etcd.start_member(member)

            return member.process.name, restart_member
        if kind in ("kill-apiserver", "kill-controller", "kill-agent"):
            pool = {"kill-apiserver": fleet.apiservers, "kill-controller": fleet.controllers}.get(
                kind, list(fleet.agents.values())
            )
            process = self.rng.choice(pool)
            return process.name, lambda _: self._kill_restart(process)
        if kind == "cut":
            host = self.rng.choice(fleet.workers)
            return host.name, lambda event: self._cut(host.name, event)
        if kind == "pause":
            process = self.rng.choice(self._pausable())
            return process.name, lambda _: self._pause_process(process)
        raise ValueError(f"unknown fault kind {kind!r} (one of {', '.join(KINDS)})")

    def _pausable(self) -> list[HostProcess]:
        fleet = self.fleet
        members = [m.process for m in fleet.etcd.members]
        return [*members, *fleet.apiservers, *fleet.controllers, *fleet.agents.values()]

    async def _pause(self, bounds: tuple[float, float]) -> None:
        await self.clock.sleep(self.rng.uniform(*bounds))

    async def _kill_restart(self, process: HostProcess) -> None:
        await process.kill()
        await self._pause(RESTART_AFTER)
        await process.start()

    async def _pause_process(self, process: HostProcess) -> None:
        process.pause()
        try:
            await self.clock.sleep(self.config.pause_for)
        finally:
            process.resume()

    async def _cut(self, host: str, event: FaultEvent) -> None:
        self.fleet.cut(host)
        try:
            await self.clock.sleep(1.0)
            escaped = await asyncio.to_thread(self.fleet.network.routes_contained)
            event.escaped_routes.update(escaped)
            await self._pause(self.config.cut_for)
        finally:
            self.fleet.heal(host)


__all__ = ["KINDS", "FaultEvent", "FaultInjector"]
