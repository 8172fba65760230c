"""The agent's Node and Lease: registration, status and the heartbeat.

Guarantees:

* **Registration** creates the Node (spec.hostname, the automatic labels `caravanserai.io/hostname`, `/os` and
  `/arch`, the configured labels) or updates an existing one (hostname corrected; of the labels only the node's
  own, the automatic ones and those under `node.caravanserai.io/`, are merged: every other label is the admin's
  once the Node exists, and a `--label` that differs from it is logged, not applied: NodeRestriction),
  then writes its status with UpdateStatus (Create refuses status): capacity and allocatable (with the extended
  resources of `--resource` and nvidia-smi, so they survive every re-registration), node info, addresses, agent
  port, state Ready and condition Ready=True (AgentReady).
  A measured throughput, the images and the restore rates already in the status are kept.
* **Every write is compare-and-swap**: on Conflict the object is read again and the change applied again.
* **The heartbeat is independent**: `Heartbeat.run` is its own task; nothing the reconcilers do can delay it.
  Each beat renews the Lease named after the node (holder = node name, `lease_duration` seconds, renew time
  from the clock) and checks that the Node still exists; a deleted Node is registered again. A beat the API
  answered is reported (`on_contact`) with the monotonic moment its renew time was stamped, before the first call
  went out: node health counts from that stamp, so the self-fence must too (never from the later answer).
* **Failures never stop it**: an unreachable API is logged and retried at the next beat; registration retries
  with backoff (1 s doubling to 30 s). Containers are not touched either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from caravanserai import meta, v1
from caravanserai.agent.config import AgentConfig
from caravanserai.agent.docker.records import DaemonInfo
from caravanserai.agent.host import extended, machine
from caravanserai.backoff import Backoff
from caravanserai.client import Client
from caravanserai.clock import Clock, timestamp
from caravanserai.errors import AlreadyExists, ApiError, CaravanseraiError, Conflict, NotFound

log = structlog.get_logger(__name__)

REASON_AGENT_READY = "AgentReady"
REASON_FENCE_UNWRITABLE = "FenceRecordUnwritable"
REASON_FENCE_RECORDED = "FenceRecorded"
CONFLICT_ATTEMPTS = 5
# Registration is retried after 1 s, doubling to 30 s.
REGISTER_BACKOFF = Backoff(initial=1.0, cap=30.0, jitter=0.0, reset_after=None)

T = TypeVar("T")


async def retry_conflicts(write: Callable[[], Awaitable[T]], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Run a read-modify-write until it does not meet a Conflict (at most `attempts` times)."""
    for _ in range(attempts - 1):
        try:
            return await write()
        except Conflict:
            continue
    return await write()


class NodeRegistrar:
    """Creates or updates this agent's Node and writes its status. `docker_info` supplies Docker's facts."""

    def __init__(
        self,
        client: Client,
        config: AgentConfig,
        *,
        docker_info: Callable[[], Awaitable[DaemonInfo]],
        clock: Clock,
        agent_port: int,
        ingress_port: int = 0,
    ) -> None:
        self._client = client
        self._config = config
        self._docker_info = docker_info
        self._clock = clock
        self._agent_port = agent_port
        self._ingress_port = ingress_port
        self.registered = asyncio.Event()

    @property
    def name(self) -> str:
        return self._config.node_name

    async def register(self) -> v1.Node:
        """Create or update the Node, then write its status. Raises the API's error when it fails."""
        info = await self._docker_info()
        config = self._config
        facts = await asyncio.to_thread(
            machine.gather_facts,
            info,
            server=config.server,
            hostname=config.hostname,
            advertise=config.advertise_address,
            resources=config.resources,
        )
        await retry_conflicts(self._ensure_node)
        node = await retry_conflicts(lambda: self._write_status(facts))
        self.registered.set()
        log.info("node registered", node=self.name, allocatable=dict(node.status.allocatable))
        return node

    async def register_until_done(self) -> v1.Node:
        """`register`, retried with backoff until it succeeds (API or Docker unreachable, …)."""
        backoff = REGISTER_BACKOFF.start(self._clock)
        while True:
            try:
                return await self.register()
            except (CaravanseraiError, OSError) as exc:  # API or Docker unreachable, refused …: keep trying
                delay = backoff.next_delay()
                log.warning("node registration failed; retrying", node=self.name, error=str(exc), retry_in=delay)
                await self._clock.sleep(delay)

    async def _ensure_node(self) -> v1.Node:
        try:
            current = await self._client.nodes.get(self.name)
        except NotFound:
            wanted = meta.with_type_meta(v1.Node())
            wanted.metadata.name = self.name
            wanted.metadata.labels.update(self._labels())
            wanted.spec.hostname = self._config.hostname
            try:
                return await self._client.nodes.create(wanted)
            except AlreadyExists:
                raise Conflict.modified(f"Node {self.name} (created concurrently)") from None
        updated = meta.copy(current)
        labels = self._labels()
        updated.metadata.labels.update({k: v for k, v in labels.items() if extended.node_owned_label(k)})
        self._warn_admin_labels(current, labels)
        updated.spec.hostname = self._config.hostname
        if updated == current:
            return current
        return await self._client.nodes.update(updated)

    def _warn_admin_labels(self, current: v1.Node, labels: dict[str, str]) -> None:
        differ = {
            k: v for k, v in labels.items() if not extended.node_owned_label(k) and current.metadata.labels.get(k) != v
        }
        if differ:
            log.warning(
                "--label not applied to the existing Node: only an admin changes labels outside "
                f"{extended.NODE_LABEL_PREFIX} (caractrl label node)",
                node=self.name,
                labels=differ,
            )

    def _labels(self) -> dict[str, str]:
        """The automatic labels (hostname, os, arch), then the configured ones (which win)."""
        return {**extended.automatic_labels(self._config.hostname), **self._config.labels}

    def desired_status(self, current: v1.NodeStatus, facts: machine.MachineFacts) -> v1.NodeStatus:
        """The status to write: the machine's facts, the allowed host paths, Ready, and everything else of
        `current` (e.g. throughput)."""
        config = self._config
        status = v1.NodeStatus()
        status.CopyFrom(current)
        status.capacity.clear()
        status.capacity.update(machine.capacity_quantities(facts.capacity))
        status.allocatable.clear()
        status.allocatable.update(
            machine.allocatable_quantities(
                facts.capacity, reserved_cpu=config.reserved_cpu, reserved_memory=config.reserved_memory
            )
        )
        status.node_info.CopyFrom(facts.node_info)
        del status.network.addresses[:]
        status.network.addresses.extend(facts.addresses)
        status.network.agent_port = self._agent_port
        status.network.ingress_port = self._ingress_port
        del status.allowed_host_paths[:]
        status.allowed_host_paths.extend(config.allowed_host_paths)
        status.state = v1.NODE_READY
        meta.set_condition(
            status.conditions,
            v1.CONDITION_READY,
            v1.TRUE,
            reason=REASON_AGENT_READY,
            message="cara-agent is running and Docker answers",
            now=self._clock.now(),
        )
        return status

    async def _write_status(self, facts: machine.MachineFacts) -> v1.Node:
        current = await self._client.nodes.get(self.name)
        updated = meta.copy(current)
        updated.status.CopyFrom(self.desired_status(current.status, facts))
        return await self._client.nodes.update_status(updated)

    async def write_throughput(self, throughput: v1.Throughput) -> v1.Node:
        """Store a throughput measurement in the Node's status (`_modify_status`)."""

        def change(status: v1.NodeStatus) -> None:
            status.network.throughput.CopyFrom(throughput)

        return await self._modify_status(change)

    async def write_fence_record(self, problem: str) -> v1.Node:
        """Condition FenceUnrecorded: True with `problem` while the agent cannot write its fence deadline for the
        node's watchdog, False once it can again (`_modify_status`; absent with no problem stays absent)."""

        def change(status: v1.NodeStatus) -> None:
            if not problem and meta.get_condition(status.conditions, v1.CONDITION_FENCE_UNRECORDED) is None:
                return
            if problem:
                state, reason = v1.TRUE, REASON_FENCE_UNWRITABLE
                message = (
                    f"cannot write the fence deadline for the node's watchdog ({problem}): if this agent freezes or "
                    "dies, nothing stops its containers by the deadline"
                )
            else:
                state, reason, message = v1.FALSE, REASON_FENCE_RECORDED, "the fence deadline is recorded"
            meta.set_condition(
                status.conditions,
                v1.CONDITION_FENCE_UNRECORDED,
                state,
                reason=reason,
                message=message,
                now=self._clock.now(),
            )

        return await self._modify_status(change)

    async def write_inventory(self, images: list[v1.NodeImage], restore_rates: dict[str, str]) -> v1.Node:
        """Store the node's images and its restores' download rates (`_modify_status`)."""

        def change(status: v1.NodeStatus) -> None:
            del status.images[:]
            status.images.extend(images)
            status.network.restore_rates.clear()
            status.network.restore_rates.update(restore_rates)

        return await self._modify_status(change)

    async def _modify_status(self, change: Callable[[v1.NodeStatus], None]) -> v1.Node:
        """Read the Node, `change` a copy of its status, write it with a compare-and-swap (again on Conflict:
        `retry_conflicts`); nothing is written when the change leaves the status as stored."""

        async def write() -> v1.Node:
            current = await self._client.nodes.get(self.name)
            updated = meta.copy(current)
            change(updated.status)
            if updated.status == current.status:
                return current
            return await self._client.nodes.update_status(updated)

        return await retry_conflicts(write)


class Heartbeat:
    """Registers the node, then renews its Lease every `heartbeat_interval` seconds until cancelled."""

    def __init__(
        self,
        client: Client,
        registrar: NodeRegistrar,
        config: AgentConfig,
        *,
        clock: Clock,
        on_contact: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        # called after every beat the API answered, with the monotonic time its renewal was stamped (self-fencing)
        self._on_contact = on_contact
        self._client = client
        self._registrar = registrar
        self._config = config
        self._clock = clock
        self.beats = 0  # successful renewals, for tests and metrics
        self.failures = 0
        self._stamped = clock.monotonic()  # when the last renewal tried was stamped (its renewTime), monotonic

    async def run(self) -> None:
        """Register (retrying), then beat forever; returns only when cancelled."""
        await self._registrar.register_until_done()
        while True:
            await self.beat()
            await self._clock.sleep(self._config.heartbeat_interval)

    async def beat(self) -> None:
        """One heartbeat: renew the Lease, re-register a deleted Node. Errors are logged, never raised."""
        try:
            await retry_conflicts(self.renew_lease)
            stamped = self._stamped
            await self._client.nodes.get(self._config.node_name)
            self.beats += 1
            if self._on_contact is not None:
                await self._on_contact(stamped)
        except NotFound:
            log.warning("node object is gone; registering again", node=self._config.node_name)
            await self._registrar.register_until_done()
        except ApiError as exc:
            self.failures += 1
            log.warning("heartbeat failed", node=self._config.node_name, error=str(exc))

    async def renew_lease(self) -> v1.Lease:
        """Create or renew the node's Lease (CAS); a lease held by someone else is taken over. The renewal is stamped
        (`renewTime`) before anything is sent, and that moment is what node health counts from."""
        name = self._config.node_name
        now = timestamp(self._clock.now())
        self._stamped = self._clock.monotonic()
        try:
            current = await self._client.leases.get(name)
        except NotFound:
            lease = meta.with_type_meta(v1.Lease())
            lease.metadata.name = name
            lease.spec.holder_identity = name
            lease.spec.lease_duration_seconds = self._config.lease_duration
            lease.spec.acquire_time.CopyFrom(now)
            lease.spec.renew_time.CopyFrom(now)
            try:
                return await self._client.leases.create(lease)
            except AlreadyExists:
                raise Conflict.modified(f"Lease {name} (created concurrently)") from None
        lease = meta.copy(current)
        if lease.spec.holder_identity != name:
            lease.spec.holder_identity = name
            lease.spec.acquire_time.CopyFrom(now)
            lease.spec.lease_transitions += 1
        lease.spec.lease_duration_seconds = self._config.lease_duration
        lease.spec.renew_time.CopyFrom(now)
        return await self._client.leases.update(lease)


__all__ = [
    "Heartbeat",
    "NodeRegistrar",
    "REASON_AGENT_READY",
    "retry_conflicts",
]
