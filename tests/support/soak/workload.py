"""The soak's mixed workload: project creates, spec updates, deletes, Secret changes and node drains, one at a
time every uniform(`op_interval`) seconds, against every apiserver of the fleet.

* Projects are named `<prefix>-<n>` (a name is never reused); each has one service running a command that stops at
  once on SIGTERM, with an environment variable `SOAK_SEQ` (a spec update changes it, so the agent recreates the
  container) and, for two in three, a variable read from one of the run's Secrets (a Secret change recreates it).
* Every write carries the next seq in `history.SEQ_ANNOTATION` and goes into the `WriteLog`: acknowledged when
  the apiserver answered, ambiguous when the call failed in a way that does not tell (`AMBIGUOUS`). A refusal
  (NotFound, Conflict after the retries, Invalid…) was certainly not applied and is only counted.
* A drain runs `caractrl drain NODE` as an operator would (in the background, one at a time), then uncordons;
  `drains` keeps each one's node and time (`draining(node, at)`: was it being drained then).
* `touched[name]` is the last time a write was aimed at a project (directly or through its Secret), for the
  convergence measure, which leaves projects alone while a change of theirs is still rolling out.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.client.nodeops import set_unschedulable
from caravanserai.clock import Clock
from caravanserai.errors import ApiError, Unavailable
from caravanserai.testing import builders
from support.fleet import Fleet
from support.soak.config import SoakConfig
from support.soak.history import CREATE, DELETE, SEQ_ANNOTATION, UPDATE, WriteLog

QUICK_STOP = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
SECRETS = 3
SECRET_KEY = "value"
DRAIN_TIMEOUT = "60s"

AMBIGUOUS: tuple[type[BaseException], ...] = (Unavailable, TimeoutError, ConnectionError)
"""Failures that leave a write's outcome unknown (any error that is not an `ApiError` refusal counts too)."""


class Workload:
    """See the module docstring."""

    def __init__(
        self, fleet: Fleet, client: Client, log: WriteLog, config: SoakConfig, *, clock: Clock, rng: random.Random
    ) -> None:
        self.fleet = fleet
        self.client = client
        self.log = log
        self.config = config
        self.clock = clock
        self.rng = rng
        self.prefix = f"soak-{fleet.run_id}"
        self.live: dict[str, str] = {}  # project → its Secret ("" for none)
        self.deleted: list[str] = []
        self.touched: dict[str, float] = {}
        self.ops: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.drain_failures: list[str] = []
        self._next = 0
        self._draining: asyncio.Task[None] | None = None
        self.drains: list[tuple[str, float, float]] = []  # (node, start, end) on the monotonic clock; end inf: on

    def secret_name(self, index: int) -> str:
        return f"{self.prefix}-secret-{index}"

    async def setup(self) -> None:
        """Create the run's Secrets."""
        for index in range(SECRETS):
            secret = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name=self.secret_name(index))))
            secret.spec.data[SECRET_KEY] = b"0"
            await self._write("secret", secret.metadata.name, CREATE, lambda seq, s=secret: self._create_secret(s, seq))

    async def run(self, until: float) -> None:
        """Operations until `until` (monotonic); then waits for a drain under way and uncordons every node."""
        try:
            while self.clock.monotonic() < until:
                await self.step()
                await self.clock.sleep(self.rng.uniform(*self.config.op_interval))
        finally:
            await self.settle()

    async def settle(self) -> None:
        if self._draining is not None:
            await asyncio.gather(self._draining, return_exceptions=True)
        for host in self.fleet.workers:
            try:
                await set_unschedulable(self.client, host.name, False)
            except ApiError:
                continue

    async def step(self) -> None:
        """One operation, chosen at random among those that make sense now."""
        choices: list[tuple[str, float]] = [("update", 3.0), ("secret", 1.5)]
        if len(self.live) < self.config.max_projects:
            choices.append(("create", 4.0 if len(self.live) < self.config.max_projects // 2 else 2.0))
        if len(self.live) > self.config.max_projects // 2:
            choices.append(("delete", 1.5))
        if self._draining is None or self._draining.done():
            choices.append(("drain", 0.4))
        kind = self.rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]
        self.ops[kind] += 1
        await getattr(self, f"_{kind}")()

    # ---- operations -------------------------------------------------------------------------------------------

    async def _create(self) -> None:
        name = f"{self.prefix}-{self._next}"
        self._next += 1
        secret = self.secret_name(self.rng.randrange(SECRETS)) if self.rng.random() < 2 / 3 else ""
        self.live[name] = secret
        self.touched[name] = self.clock.monotonic()
        await self._write("project", name, CREATE, lambda seq: self._create_project(name, secret, seq))

    async def _update(self) -> None:
        if not self.live:
            return
        name = self.rng.choice(sorted(self.live))
        self.touched[name] = self.clock.monotonic()

        async def write(seq: int) -> str:
            def mutate(obj: v1.Project) -> bool:
                obj.metadata.annotations[SEQ_ANNOTATION] = str(seq)
                _set_env(obj.spec.services[0], "SOAK_SEQ", str(seq))
                return True

            updated, _ = await modify(self.client.projects, name, mutate)
            return str(updated.metadata.resource_version)

        await self._write("project", name, UPDATE, write)

    async def _delete(self) -> None:
        name = self.rng.choice(sorted(self.live))
        del self.live[name]
        self.deleted.append(name)
        self.touched[name] = self.clock.monotonic()

        async def write(_: int) -> str:
            await self.client.projects.delete(name)
            return ""

        await self._write("project", name, DELETE, write)

    async def _secret(self) -> None:
        index = self.rng.randrange(SECRETS)
        name = self.secret_name(index)
        now = self.clock.monotonic()
        for project, secret in self.live.items():
            if secret == name:
                self.touched[project] = now

        async def write(seq: int) -> str:
            def mutate(obj: v1.Secret) -> bool:
                obj.metadata.annotations[SEQ_ANNOTATION] = str(seq)
                obj.spec.data[SECRET_KEY] = str(seq).encode()
                return True

            updated, _ = await modify(self.client.secrets, name, mutate)
            return str(updated.metadata.resource_version)

        await self._write("secret", name, UPDATE, write)

    async def _drain(self) -> None:
        host = self.rng.choice(self.fleet.workers).name
        now = self.clock.monotonic()
        for name in self.live:
            self.touched[name] = now
        self._draining = asyncio.create_task(self._drain_and_uncordon(host))

    def draining(self, node: str, at: float) -> bool:
        """Whether `node` was being drained (from `caractrl drain` to its uncordon) at `at` (monotonic)."""
        return any(name == node and start <= at <= end for name, start, end in self.drains)

    async def _drain_and_uncordon(self, node: str) -> None:
        index = len(self.drains)
        self.drains.append((node, self.clock.monotonic(), float("inf")))
        try:
            await self._drain_then_uncordon(node)
        finally:
            self.drains[index] = (node, self.drains[index][1], self.clock.monotonic())

    async def _drain_then_uncordon(self, node: str) -> None:
        result = await asyncio.to_thread(self.fleet.caractrl, "drain", node, "--timeout", DRAIN_TIMEOUT, timeout=120)
        if result.returncode != 0:
            self.drain_failures.append(f"{node}: {(result.stderr or result.stdout).strip()[-300:]}")
        for _ in range(30):
            try:
                await set_unschedulable(self.client, node, False)
                return
            except Exception:  # noqa: BLE001 - the control plane may be down right now; try again
                await self.clock.sleep(2.0)

    # ---- writes -----------------------------------------------------------------------------------------------

    async def _write(self, kind: str, name: str, op: str, call: Any) -> None:
        """Run `call(seq)` (which returns the resource version written) and record its outcome."""
        seq = self.log.next_seq()
        try:
            version = await call(seq)
        except ApiError as exc:
            if isinstance(exc, AMBIGUOUS):
                self.log.unknown(kind, name, op, seq)
            else:
                self.refused[f"{op} {kind}: {type(exc).__name__}"] += 1
            return
        except Exception:  # noqa: BLE001 - a transport failure: the write may or may not have been applied
            self.log.unknown(kind, name, op, seq)
            return
        self.log.acked(kind, name, op, seq, version)

    async def _create_project(self, name: str, secret: str, seq: int) -> str:
        obj = builders.project(name, image=self.fleet.config.image, services=["main"], command=QUICK_STOP)
        obj.metadata.annotations[SEQ_ANNOTATION] = str(seq)
        service = obj.spec.services[0]
        _set_env(service, "SOAK_SEQ", str(seq))
        if secret:
            service.env.add(name="SOAK_SECRET", value_from=v1.KeyRef(secret=secret, key=SECRET_KEY))
        created = await self.client.projects.create(obj)
        return str(created.metadata.resource_version)

    async def _create_secret(self, secret: v1.Secret, seq: int) -> str:
        secret.metadata.annotations[SEQ_ANNOTATION] = str(seq)
        created = await self.client.secrets.create(secret)
        return str(created.metadata.resource_version)


def _set_env(service: Any, name: str, value: str) -> None:
    for var in service.env:
        if var.name == name:
            var.value = value
            return
    service.env.add(name=name, value=value)


__all__ = ["QUICK_STOP", "Workload"]
