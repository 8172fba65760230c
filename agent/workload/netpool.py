"""Which Docker network each project of this node runs on, and a warm pool of spare networks.

Creating a bridge network is one of the slowest things dockerd does (tens of milliseconds of its time, one at a
time; removing one costs more), and every project needs a network of its own before its first container can be
created. The pool keeps `size` spare networks ready, so that a project arriving takes one at once and the
creation of its replacement happens in the background; a removed project gives its network back.

How a project's network is found (`network_for`), in this order:

1. the network its current containers are configured on: a pool network of this node, or
   `cara_<project>_<node>` (made by an agent running without a pool, or before the pool existed);
2. the network given to it earlier by this process (a project whose containers are not made yet, or are being
   replaced);
3. with a pool (`size` > 0): a spare pool network, checked just before to exist and to have no container
   configured on it; when none is spare, a new pool network is made for the project at once;
4. without a pool (`size` 0): `cara_<project>_<node>`, made when missing, exactly as before the pool existed.

Given an address space (`subnets`, see `subnets.py`), every network the pool makes (spare, made for a project,
`cara_<project>_<node>`) gets a subnet of it, not one of Docker's scarce default address ranges; a project with
more services than a spare network's subnet holds gets a network of its own with a bigger subnet.

Guarantees:

* **Ownership is derived from Docker, never stored.** A pool network belongs to the project whose containers are
  configured on it (running or not); one on which no container is configured is spare. A restarted agent (also
  one SIGKILLed at any moment) therefore finds every owner again: a network handed out but not yet used is spare
  again, one in use still belongs to its project, nothing is leaked and nothing is given twice. Docker is read
  again `FIRST_DERIVE_AFTER` seconds after start and every `DERIVE_EVERY` seconds, so that a network whose creation
  a killed predecessor had asked for, and which appeared only after this process first looked, is found too.
* **One project per network.** A network is handed out only when no container is configured on it and no
  project of this process holds it; the agent configures a project's containers only on that project's network.
* **Spare networks are kept at `size`**, in the background, one Docker call at a time, and only while no project
  waits for a network being made for it (a project's own creation goes first in dockerd's queue) and, for at most
  `MAX_DEFER` seconds, while no project is being brought up or removed (`busy()`): during a burst of arrivals the
  pool's own work would compete in dockerd with the containers being started. Networks given back by removed
  projects are spare again; spares beyond `size` are removed in the background (with `size` 0: every one), once
  no project has taken or given back a network for `TRIM_AFTER` seconds: a node whose projects come and go keeps
  the networks they give back for the next ones instead of removing one and making another (both slow in dockerd,
  and in its way while containers start). A
  background failure (Docker down, its address pools exhausted) is logged and retried with backoff; no project
  ever waits for the pool's own work.
* **A clean stop leaves no spare behind** (`release_spares`, called by the agent after its reconciles drained):
  every pool network of this node on which no container is configured is removed, also one whose making a
  cancelled upkeep step had asked for; networks in use stay with their projects (their containers keep running).
  A killed agent leaves its spares; the next agent of the node adopts them (and trims them to `size`), and
  `cara-agent --cleanup` removes them for a node that never comes back.
* **Cleanup paths stay apart.** Pool networks carry `caravanserai.io/network-pool=true` and no project label, so
  the fencing sweep (`ProjectRuntime.projects_present`) never mistakes one for a project's, and removing a project
  removes its `cara_<project>_<node>` network (by label) and gives back the pool network its containers were on.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterable

import structlog

from caravanserai import v1
from caravanserai.agent.docker import containers, naming
from caravanserai.agent.docker.engine import DockerError, DockerRuntime
from caravanserai.agent.docker.records import ContainerSummary
from caravanserai.agent.workload.subnets import SubnetAllocator
from caravanserai.backoff import Backoff
from caravanserai.clock import Clock, SystemClock, run_within

log = structlog.get_logger(__name__)

POOL_PER_CORE = 10  # cara-agent's default pool: spare networks per core of the node (see `default_pool_size`)
MIN_POOL_SIZE = 4
MAX_POOL_SIZE = 64
REMOVE_AT_ONCE = 4  # networks removed at once on a clean stop (dockerd does some of the work of each in parallel)
MAX_DEFER = 10.0  # seconds the pool's upkeep waits at most for busy projects
TRIM_AFTER = 10.0  # seconds without a network taken or given back before spares beyond the size are removed
FIRST_DERIVE_AFTER = 5.0  # seconds after start when the pool reads Docker a second time, then every DERIVE_EVERY
DERIVE_EVERY = 60.0
RETRY = Backoff(initial=1.0, cap=30.0)
TOKEN_BYTES = 6


def default_pool_size(cores: int) -> int:
    """cara-agent's default `--network-pool` for a node of `cores` cores: `POOL_PER_CORE` per core, between
    `MIN_POOL_SIZE` and `MAX_POOL_SIZE`. A burst of arrivals on a node is limited by its cores (each container start
    costs dockerd and the kernel CPU), so a bigger node takes a bigger burst; with the agent's own address space a
    spare network costs a /28 of it, not one of Docker's default ranges."""
    return max(MIN_POOL_SIZE, min(MAX_POOL_SIZE, POOL_PER_CORE * cores))


class NetworkPool:
    """The networks of the projects of `node` and the node's `size` spare pool networks. `run()` keeps the pool
    filled; `network_for` and `give_back` are called by `ProjectRuntime`, one call per project at a time."""

    def __init__(
        self,
        docker: DockerRuntime,
        *,
        node: str,
        size: int = 0,
        clock: Clock | None = None,
        subnets: SubnetAllocator | None = None,
    ) -> None:
        if size < 0:
            raise ValueError(f"network pool size must be 0 or more, not {size}")
        self.docker = docker
        self.node = node
        self.size = size
        self.subnets = subnets  # None: Docker chooses each network's subnet from its default address pools
        self._clock: Clock = clock or SystemClock()
        self._claims: dict[str, str] = {}  # project → network handed to it by this process
        self._spare: list[str] = []  # pool networks with no container configured on them, held by no project
        self._making = 0  # networks being made right now for projects that found no spare one
        self._busy = 0  # projects being brought up or removed right now (`busy()`)
        self._deferred_since: float | None = None  # when upkeep was first put off for busy projects
        self._last_use: float | None = None  # when a project last took or gave back a network (`clock.monotonic()`)
        self._transit: set[str] = set()  # networks being made, checked or removed by this process right now
        self._next_derive = 0.0  # when `_derive` is due again (`clock.monotonic()`)
        self._loaded = False
        self._load_lock = asyncio.Lock()
        self._wake = asyncio.Event()  # something changed that the background loop may act on
        self._warm = asyncio.Event()  # the pool was full once, or its upkeep failed (see `warmed`)

    @property
    def spare(self) -> tuple[str, ...]:
        """The spare pool networks as this process knows them."""
        return tuple(self._spare)

    # ---- what projects call ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def busy(self) -> AsyncIterator[None]:
        """Around bringing a project up or removing it: the pool's upkeep waits (at most `MAX_DEFER` s)."""
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            self._wake.set()

    async def network_for(self, project: v1.Project, attached: Iterable[str] = ()) -> str:
        """The name of the network the project's containers are to be configured on, made to exist (see the
        module docstring for the order). `attached`: the networks its current containers are configured on."""
        await self._load()
        name = naming.key_of(project)
        legacy = naming.network_name(name, self.node)
        mine = sorted(n for n in set(attached) if n == legacy or naming.is_pool_network(n, self.node))
        network = mine[0] if mine else self._claims.get(name)
        if network is None and self.size == 0:
            network = legacy
        needed = len(project.spec.services)  # containers on the network
        if network is not None:
            self._hold(name, network)
            await self._ensure(self._config(project, network), needed)
            return network
        spare = await self._take_spare() if self._fits_spare(needed) else None
        network = spare or await self._make_for(name, needed)
        self._hold(name, network)
        return network

    def _fits_spare(self, needed: int) -> bool:
        """Whether a spare network's subnet holds `needed` containers (always, when Docker chooses subnets)."""
        return self.subnets is None or needed <= self.subnets.space.containers_per_subnet

    async def _ensure(self, config: dict[str, object], needed: int = 0) -> None:
        """Make the network `config` describes unless it exists: on a subnet of the address space when there is
        one, else on one Docker chooses."""
        if self.subnets is None:
            await self.docker.ensure_network(config)
        else:
            await self.subnets.ensure(config, containers=needed)

    def give_back(self, project: str, networks: Iterable[str] = ()) -> None:
        """The project's containers are gone: the pool networks it held (and `networks`, those its containers were
        configured on) are spare again."""
        held = self._claims.pop(project, None)
        for network in {*networks, *([held] if held else [])}:
            if naming.is_pool_network(network, self.node):
                self._add_spare(network)
        self._last_use = self._clock.monotonic()
        self._wake.set()

    def _hold(self, project: str, network: str) -> None:
        previous = self._claims.get(project)
        self._claims[project] = network
        if network in self._spare:
            self._spare.remove(network)
            self._last_use = self._clock.monotonic()
        if previous is not None and previous != network and naming.is_pool_network(previous, self.node):
            self._add_spare(previous)  # checked again before it is handed out
        self._wake.set()

    def _add_spare(self, network: str) -> None:
        if network not in self._spare and network not in self._claims.values():
            self._spare.append(network)

    def _config(self, project: v1.Project, network: str) -> dict[str, object]:
        if naming.is_pool_network(network, self.node):
            return containers.pool_network_config(network, node=self.node)
        return containers.network_config(project, node=self.node)

    async def _take_spare(self) -> str | None:
        """A spare network that still exists and has no container configured on it (others are dropped: a
        vanished one is gone, a used one belongs to the project of its containers)."""
        while self._spare:
            network = self._spare.pop(0)
            self._transit.add(network)
            try:
                present, users = await asyncio.gather(  # one round trip's wait for both
                    self.docker.network_present(network), self.docker.list_containers([], network=network)
                )
                if present and not users:
                    return network
            finally:
                self._transit.discard(network)
        return None

    async def _make_for(self, project: str, needed: int) -> str:
        self._making += 1
        network = self._new_name()
        self._transit.add(network)
        try:
            log.debug("no spare network; making one", project=project, network=network)
            await self._create(network, needed)
            return network
        finally:
            self._transit.discard(network)
            self._making -= 1
            self._wake.set()

    async def _create(self, network: str, size: int = 0) -> None:
        """Make a pool network for `size` containers. Cancelled meanwhile (the agent stops), it still waits for
        Docker's answer before it gives up, so that a stopped agent leaves no network behind that it did not know
        of (a killed one cannot: `_derive` finds those)."""
        config = containers.pool_network_config(network, node=self.node)
        creation = asyncio.ensure_future(self._ensure(config, size))
        try:
            await asyncio.shield(creation)
        except asyncio.CancelledError:
            await asyncio.wait({creation})
            raise

    def _new_name(self) -> str:
        return naming.pool_network_name(secrets.token_hex(TOKEN_BYTES), self.node)

    async def release_spares(self) -> list[str]:
        """On a clean stop, once no project is brought up any more: remove the node's pool networks on which no
        container is configured (see the module docstring); the names removed."""
        listed = await self.docker.list_networks(naming.label_filter(naming.pool_labels(self.node)))
        removed = await _remove_unused(
            self.docker, [n.name for n in listed if naming.is_pool_network(n.name, self.node)]
        )
        self._spare = [n for n in self._spare if n not in removed]
        if removed:
            log.info("spare networks removed", networks=len(removed))
        return removed

    # ---- what Docker says ----------------------------------------------------------------------------------

    async def _load(self) -> None:
        """Once per process, before anything else: what Docker has (`_derive`)."""
        if self._loaded:
            return
        async with self._load_lock:
            if self._loaded:
                return
            await self._derive()
            self._loaded = True

    async def _derive(self) -> None:
        """Every pool network of this node on which no container is configured, that this process neither holds
        for a project nor is making, checking or removing, is spare. Repeated every `DERIVE_EVERY` seconds: a
        network whose creation a killed predecessor had asked for may appear after this process first looked."""
        listed = await self.docker.list_networks(naming.label_filter(naming.pool_labels(self.node)))
        pool = [n.name for n in listed if naming.is_pool_network(n.name, self.node)]
        used = {n for c in await self.docker.list_containers(naming.node_filter(self.node)) for n in c.networks}
        before = len(self._spare)
        for network in sorted(pool):
            if network not in used and network not in self._transit:
                self._add_spare(network)
        self._next_derive = self._clock.monotonic() + (DERIVE_EVERY if self._loaded else FIRST_DERIVE_AFTER)
        if not self._loaded or len(self._spare) != before:
            log.info("network pool read from Docker", spare=len(self._spare), in_use=len(set(pool) & used))

    # ---- the background ------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep `size` spare networks: make missing ones, remove extra ones; returns only when cancelled."""
        backoff = RETRY.start(self._clock)
        while True:
            self._wake.clear()
            try:
                await self._load()
                if self._clock.monotonic() >= self._next_derive:
                    await self._derive()
                acted = await self.step()
                backoff.reset()
            except DockerError as exc:
                self._warm.set()
                log.warning("network pool upkeep failed; retrying", error=str(exc))
                await backoff.wait()
                continue
            if not acted:
                await self._pause()

    async def _pause(self) -> None:
        """Until something changes, or until deferred upkeep is due."""
        due = self._next_derive
        if self._deferred_since is not None and not self._making:  # a finished making sets `_wake`
            due = min(due, self._deferred_since + MAX_DEFER)
        if len(self._spare) > self.size and self._last_use is not None:
            due = min(due, self._last_use + TRIM_AFTER)
        with contextlib.suppress(TimeoutError):
            await run_within(self._clock, self._wake.wait(), max(due - self._clock.monotonic(), 0.0))

    def _deferred(self) -> bool:
        """Whether upkeep waits: a project waits for a network being made, or projects are busy (for at most
        `MAX_DEFER` seconds in a row)."""
        if self._making:
            return True
        if not self._busy:
            self._deferred_since = None
            return False
        if self._deferred_since is None:
            self._deferred_since = self._clock.monotonic()
        return self._clock.monotonic() - self._deferred_since < MAX_DEFER

    def _trim_due(self) -> bool:
        """Whether spares beyond the size may go: no project took or gave back a network for `TRIM_AFTER` s."""
        return self._last_use is None or self._clock.monotonic() - self._last_use >= TRIM_AFTER

    async def warmed(self) -> None:
        """Returns once the pool has held `size` spare networks, or as soon as its upkeep failed (a pool that
        cannot fill never holds anyone up)."""
        await self._warm.wait()

    async def step(self) -> bool:
        """Make or remove one spare network if the pool needs it and its upkeep is not deferred; whether it did."""
        if len(self._spare) >= self.size:
            self._warm.set()
        if len(self._spare) == self.size:
            self._deferred_since = None
            return False
        if len(self._spare) > self.size and not self._trim_due():
            return False
        if self._deferred():
            return False
        self._deferred_since = None
        grow = len(self._spare) < self.size
        network = self._new_name() if grow else self._spare.pop()
        self._transit.add(network)
        try:
            if grow:
                await self._create(network)
                self._add_spare(network)
            elif not await self.docker.list_containers([], network=network):  # else: its containers' project's
                await self.docker.remove_network(network)
        finally:
            self._transit.discard(network)
        return True


async def remove_unused_networks(docker: DockerRuntime, node: str) -> list[str]:
    """Remove every network labelled for `node` (pool networks and `cara_<project>_<node>`) on which no container
    is configured; the names removed. One Docker refusal (a container attached meanwhile) is logged and skipped.
    What a clean stop and `cara-agent --cleanup` do; never call it while the node's agent brings projects up."""
    return await _remove_unused(docker, [n.name for n in await docker.list_networks(naming.node_filter(node))])


async def _remove_unused(docker: DockerRuntime, networks: Iterable[str]) -> list[str]:
    """Remove each of `networks` on which no container is configured (`REMOVE_AT_ONCE` at a time: a pool sized to
    a burst is removed within a clean stop's time); the names removed, sorted."""
    gate = asyncio.Semaphore(REMOVE_AT_ONCE)

    async def remove(network: str) -> str | None:
        async with gate:
            try:
                if await docker.list_containers([], network=network):
                    return None  # still some project's
                await docker.remove_network(network)
            except DockerError as exc:
                log.warning("could not remove a network", network=network, error=str(exc))
                return None
            return network

    done = await asyncio.gather(*(remove(n) for n in sorted(networks)))
    return [n for n in done if n is not None]


def attached_networks(listed: Iterable[ContainerSummary]) -> list[str]:
    """The networks the listed containers are configured on, sorted."""
    return sorted({n for c in listed for n in c.networks})


__all__ = ["MAX_POOL_SIZE", "MIN_POOL_SIZE", "POOL_PER_CORE", "TRIM_AFTER", "NetworkPool", "attached_networks"]
__all__ += ["default_pool_size", "remove_unused_networks"]
