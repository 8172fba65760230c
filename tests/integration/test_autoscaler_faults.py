"""The autoscaler over a real apiserver with simulated nodes (Node and Lease objects, no agent): batching, the
reports, the faults of the issue (a provider that fails, hangs, creates a node that never joins or reports
machines the cluster does not know; a restart mid-decision; two autoscalers; a bind racing a scale-down) and
scale-down safety."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from cluster_sim import add_node, events_for, running_manager, set_phase

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, timestamp
from caravanserai.controller import LeaderElectionConfig, Manager
from caravanserai.controllers.autoscaler import app as autoscaler_app
from caravanserai.controllers.autoscaler.providers import ProviderNode, Providers
from caravanserai.controllers.autoscaler.reconciler import AutoscalerConfig
from caravanserai.controllers.autoscaler.snapshot import is_unschedulable
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for

CONFIG = AutoscalerConfig(scan_interval=0.2, backoff=60.0, new_node_grace=5.0, handoff_timeout=5.0)


class SimulatedProvider(Providers):
    """Creates simulated nodes (labelled, Ready) for the names asked, unless `joins` is False; records the calls."""

    def __init__(self, client: Client, *, joins: bool = True, cpu: str = "4") -> None:
        super().__init__()
        self.client, self.joins, self.cpu = client, joins, cpu
        self.created: list[str] = []
        self.deleted: list[str] = []

    def of(self, group: v1.NodeGroup) -> SimulatedProvider:  # type: ignore[override]  # the provider itself
        return self

    async def increase(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        for name in nodes:
            if name in self.created:
                continue
            self.created.append(name)
            if self.joins:
                await add_node(self.client, name, cpu=self.cpu, labels={v1.LABEL_NODE_GROUP: group.metadata.name})

    async def delete(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        self.deleted.extend(nodes)

    async def list(self, group: v1.NodeGroup) -> list[ProviderNode] | None:
        return None


def node_group(
    name: str, *, cpu: str = "4", max_size: int = 5, create: Sequence[str] = ("true",), **exec_: str
) -> v1.NodeGroup:
    group = meta.with_type_meta(v1.NodeGroup())
    group.metadata.name = name
    group.spec.max_size = max_size
    group.spec.template.allocatable.update({"cpu": cpu, "memory": "8Gi"})
    group.spec.provider.exec.create.extend(create)
    group.spec.provider.exec.delete.append("true")
    for key, value in exec_.items():
        if key == "list":
            group.spec.provider.exec.list.extend(["sh", "-c", value])
        else:
            setattr(group.spec.provider.exec, key, value)
    group.spec.scale_down.idle_time = "1s"
    return group


@contextlib.asynccontextmanager
async def cluster(client: Client, providers: Providers | None = None, *, scheduler: bool = True) -> AsyncIterator[None]:
    clock = SystemClock()

    def setup(manager: Manager) -> None:
        if scheduler:
            scheduler_app.setup(manager, client, clock)
        parts = autoscaler_app.setup(manager, client, clock, autoscaler_app.AutoscalerOptions(CONFIG))
        if providers is not None:
            parts.reconciler.providers = providers
            for step in (parts.reconciler._book, parts.reconciler._up, parts.reconciler._down):  # noqa: SLF001  # the test swaps the provider in
                object.__setattr__(step, "providers", providers)

    async with running_manager(client, setup, clock=clock):
        yield


async def pending(client: Client, count: int, *, cpu: str = "1", prefix: str = "p") -> list[str]:
    names = [f"{prefix}{i}" for i in range(count)]
    for name in names:
        await client.projects.create(project(name, requests={"cpu": cpu}))
    return names


async def group_status(client: Client, name: str) -> v1.NodeGroupStatus:
    return (await client.nodegroups.get(name)).status


async def test_ten_pending_projects_that_fit_on_two_nodes_ask_for_two(client: Client) -> None:
    await add_node(client, "small", cpu="500m")
    provider = SimulatedProvider(client, cpu="5")
    async with cluster(client, provider):
        names = await pending(client, 10, cpu="1")
        await wait_for(lambda: _all_unschedulable(client, names), timeout=20)
        await client.nodegroups.create(node_group("big", cpu="5"))  # one decision for the ten
        await wait_for(lambda: len(provider.created) == 2, timeout=20)
        status = await group_status(client, "big")
        assert status.last_scale_up.to_size == 2 and len(status.last_scale_up.projects) == 10
        events = await wait_for(lambda: events_for(client, "p0", "TriggeredScaleUp"), timeout=10)
        assert events[0].spec.message == "triggered scale-up of group big: 0 → 2"
        await wait_for(lambda: _all_bound(client, names), timeout=20)
        assert len(provider.created) == 2


async def _all_unschedulable(client: Client, names: Sequence[str]) -> bool:
    return all([is_unschedulable(await client.projects.get(n)) for n in names])


async def _all_bound(client: Client, names: Sequence[str]) -> bool:
    return all([(await client.projects.get(n)).status.node_ref for n in names])


async def test_a_project_no_template_fits_is_reported_and_asks_for_nothing(client: Client) -> None:
    await add_node(client, "n", cpu="1")
    provider = SimulatedProvider(client)
    await client.nodegroups.create(node_group("small", cpu="2"))
    async with cluster(client, provider):
        await pending(client, 1, cpu="64", prefix="huge")
        await wait_for(lambda: events_for(client, "huge0", "NotTriggerScaleUp"), timeout=20)
        (event,) = await events_for(client, "huge0", "NotTriggerScaleUp")
        assert event.spec.message == "no node group can ever fit this project: small: insufficient cpu"
        assert provider.created == [] and (await group_status(client, "small")).desired == 0


async def test_a_failing_and_a_hanging_provider_command_back_the_group_off(client: Client) -> None:
    await add_node(client, "n", cpu="1")
    await client.nodegroups.create(node_group("failing", create=["sh", "-c", "echo no quota >&2; exit 3"]))
    await client.nodegroups.create(node_group("hanging", create=["sleep", "30"], timeout="0.5s"))
    async with cluster(client):
        await pending(client, 1, cpu="2")

        async def both_backed_off() -> bool:
            return all([(await group_status(client, g)).HasField("backoff_until") for g in ("failing", "hanging")])

        await wait_for(both_backed_off, timeout=30)
        for name, said in (("failing", "exited with status 3: no quota"), ("hanging", "timed out after")):
            status = await group_status(client, name)
            assert status.desired == 0 and not status.provisioning
            backoff = meta.get_condition(status.conditions, "Backoff")
            assert backoff is not None and backoff.status == v1.TRUE and said in backoff.message


async def test_a_node_that_never_registers_is_deleted_and_the_group_backs_off(client: Client) -> None:
    await add_node(client, "n", cpu="1")
    provider = SimulatedProvider(client, joins=False)
    group = node_group("ghosts")
    group.spec.register_timeout = "1s"
    await client.nodegroups.create(group)
    async with cluster(client, provider):
        await pending(client, 1, cpu="2")

        async def backed_off() -> bool:
            return (await group_status(client, "ghosts")).HasField("backoff_until")

        await wait_for(backed_off, timeout=20)
        assert provider.deleted == provider.created[:1]
        status = await group_status(client, "ghosts")
        assert status.HasField("backoff_until") and not status.provisioning and status.desired == 0
        assert await events_for(client, "ghosts", "NodeNeverRegistered")


async def test_machines_the_cluster_does_not_know_are_reported_not_counted(client: Client) -> None:
    await client.nodegroups.create(node_group("listed", list="echo stranger"))
    async with cluster(client, scheduler=False):

        async def reported() -> bool:
            status = await group_status(client, "listed")
            found = meta.get_condition(status.conditions, "UnknownNodes")
            return found is not None and found.status == v1.TRUE and "stranger" in found.message

        await wait_for(reported, timeout=20)
        assert (await group_status(client, "listed")).current == 0


async def test_a_decision_recorded_before_a_crash_is_acted_on_under_the_same_name(client: Client) -> None:
    await add_node(client, "n", cpu="1")
    created = await client.nodegroups.create(node_group("g"))
    recorded = meta.copy(created)
    recorded.status.desired = 1
    recorded.status.provisioning.add(name="g-crash", requested_at=timestamp(SystemClock().now()), created=False)
    await client.nodegroups.update_status(recorded)
    await pending(client, 1, cpu="2")
    provider = SimulatedProvider(client)
    async with cluster(client, provider):
        await wait_for(lambda: provider.created, timeout=20)
        await wait_for(lambda: _running_on(client, "p0", "g-crash"), timeout=20)
        assert provider.created == ["g-crash"]  # the same name, not a second node
        assert (await group_status(client, "g")).desired == 1


async def _running_on(client: Client, name: str, node: str) -> bool:
    return (await client.projects.get(name)).status.node_ref == node


async def test_two_autoscalers_one_leader_one_scale_up(client: Client) -> None:
    await add_node(client, "n", cpu="1")
    await client.nodegroups.create(node_group("g"))
    provider = SimulatedProvider(client)
    clock = SystemClock()
    managers = []
    for who in ("a", "b"):
        election = LeaderElectionConfig(
            name="cara-autoscaler", identity=who, lease_duration=2, renew_deadline=1.5, retry_period=0.2
        )
        manager = Manager(client, clock=clock, leader_election=election, shutdown_timeout=5.0)
        parts = autoscaler_app.setup(manager, client, clock, autoscaler_app.AutoscalerOptions(CONFIG))
        for step in (parts.reconciler._book, parts.reconciler._up, parts.reconciler._down):  # noqa: SLF001  # the test swaps the provider in
            object.__setattr__(step, "providers", provider)
        managers.append(manager)
    scheduling = Manager(client, clock=clock, shutdown_timeout=5.0)
    scheduler_app.setup(scheduling, client, clock)
    async with running(scheduling), running(managers[0]), running(managers[1]):
        await pending(client, 3, cpu="1")
        await wait_for(lambda: provider.created, timeout=20)
        await wait_for(lambda: _all_scheduled_or_absorbed(client), timeout=10)
        assert len(provider.created) == 1 and (await group_status(client, "g")).desired == 1


async def _all_scheduled_or_absorbed(client: Client) -> bool:
    status = await group_status(client, "g")
    return status.current == 1 and not status.provisioning


async def test_a_bind_racing_a_scale_down_wins_and_the_node_stays(client: Client) -> None:
    await add_node(client, "spare", cpu="4")
    await add_node(client, "g-idle", cpu="4", labels={v1.LABEL_NODE_GROUP: "g"})
    created = await client.nodegroups.create(node_group("g"))
    decided = meta.copy(created)  # the removal was decided when the node was empty …
    decided.status.removing.CopyFrom(v1.NodeRemoval(node="g-idle", started_at=timestamp(SystemClock().now())))
    await client.nodegroups.update_status(decided)
    await client.projects.create(project("late", requests={"cpu": "1"}))
    await set_phase(client, "late", v1.SCHEDULED, node_ref="g-idle")  # … and a project was bound meanwhile
    async with cluster(client, SimulatedProvider(client), scheduler=False):

        async def cancelled() -> bool:
            return not (await group_status(client, "g")).HasField("removing")

        await wait_for(cancelled, timeout=20)

        async def schedulable() -> bool:  # a pass on a stale copy of the group may cordon again, then cancel again
            return not (await client.nodes.get("g-idle")).spec.unschedulable

        await wait_for(schedulable, timeout=10)
        assert await events_for(client, "g", "ScaleDownCancelled")


async def test_safe_to_evict_false_keeps_an_idle_node_and_a_plain_one_is_removed(client: Client) -> None:
    await add_node(client, "spare", cpu="8")
    for name in ("g-kept", "g-gone"):
        await add_node(client, name, cpu="4", labels={v1.LABEL_NODE_GROUP: "g"})
    pinned = project("pinned", requests={"cpu": "100m"})
    pinned.metadata.annotations[v1.ANNOTATION_SAFE_TO_EVICT] = "false"
    await client.projects.create(pinned)
    await set_phase(client, "pinned", v1.SCHEDULED, node_ref="g-kept")
    provider = SimulatedProvider(client)
    await client.nodegroups.create(node_group("g"))
    async with cluster(client, provider, scheduler=False):
        await wait_for(lambda: provider.deleted == ["g-gone"], timeout=30)

        async def recorded() -> bool:  # the group's status is written after the provider deleted the node
            status = await group_status(client, "g")
            return list(status.last_scale_down.nodes) == ["g-gone"] and not status.HasField("removing")

        await wait_for(recorded, timeout=10)
        assert (await client.nodes.get("g-kept")).metadata.name == "g-kept"


async def test_a_scale_down_moves_a_replica_only_within_its_sets_disruption_budget(client: Client) -> None:
    # The idle group node runs one replica of a set whose budget wants both replicas available: the scale-down
    # cordons the node but leaves the replica where it is (no move, no deletion) until the budget allows.
    await add_node(client, "spare", cpu="8")
    await add_node(client, "g-idle", cpu="4", labels={v1.LABEL_NODE_GROUP: "g"})
    web = meta.with_type_meta(v1.ProjectSet())
    web.metadata.name = "web"
    web.spec.replicas = 2
    web.spec.selector.match_labels["app"] = "web"
    web.spec.template.labels["app"] = "web"
    web.spec.template.spec.services.add(name="svc0", image="busybox:test", command=["sleep", "3600"])
    web.spec.disruption_budget.min_available = "2"
    web = await client.projectsets.create(web)
    now = SystemClock().now()
    for name, node in (("web-a", "spare"), ("web-b", "g-idle")):
        replica = project(name, labels={"app": "web"}, requests={"cpu": "100m"})
        meta.set_owner(replica, web, controller=True)
        created = await client.projects.create(replica)
        bound = await client.projects.update_status(lifecycle.bind(created, node, now=now))
        running = lifecycle.run(bound, reason="ContainersRunning", message="up", now=now)
        running.status.services.add(name="svc0", state="running", ready=True, image="busybox:test")
        running.status.observed_generation = bound.metadata.generation
        meta.set_condition(running.status.conditions, v1.CONDITION_READY, v1.TRUE, reason="Ready", message="", now=now)
        await client.projects.update_status(running)
    provider = SimulatedProvider(client)
    await client.nodegroups.create(node_group("g"))
    async with cluster(client, provider, scheduler=False):

        async def removing() -> bool:
            return (await group_status(client, "g")).HasField("removing")

        await wait_for(removing, timeout=30)
        await asyncio.sleep(3)  # several passes of the removal
        held = await client.projects.get("web-b")
        assert (
            held.status.node_ref == "g-idle" and not held.status.HasField("move") and not held.status.previous_node_ref
        )
        assert provider.deleted == []
        assert (await client.nodes.get("g-idle")).spec.unschedulable
