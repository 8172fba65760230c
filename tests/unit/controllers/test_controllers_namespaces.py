"""Controllers with namespaces: two projects of the same name in two namespaces never collide (scheduler, ProjectSets,
garbage collector), placement terms select projects of their own namespace, owner references resolve within the
dependent's namespace, events go in their object's namespace, and a Terminating namespace is emptied."""

from __future__ import annotations

import time
from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.clock import SystemClock, timestamp
from caravanserai.controller import EventRecorder
from caravanserai.controllers.gc.namespaces import (
    CONDITION_CONTENT_REMAINING,
    NamespaceReconciler,
    namespace_of_deleted_project,
)
from caravanserai.controllers.gc.ownergraph import Action, Node, OwnerGraph, plan_dependent
from caravanserai.controllers.gc.owners import OwnerCollector
from caravanserai.controllers.gc.reconciler import GCReconciler
from caravanserai.controllers.projectset.reconciler import SET_INDEX, ProjectSetReconciler, set_index
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.reconciler import SchedulerReconciler
from caravanserai.controllers.scheduler.scores import tie_break_key
from caravanserai.controllers.scheduler.snapshot import shown
from caravanserai.errors import FailedPrecondition
from caravanserai.informer import NODE_REF_INDEXERS, PHASE_INDEXERS, Indexer, SharedInformerFactory
from caravanserai.testing import FakeClient
from caravanserai.testing.builders import lease, node, node_status, project
from caravanserai.workqueue import WorkQueue

CLOCK = SystemClock()
HOSTNAME = "caravanserai.io/hostname"


def scheduler(client: FakeClient, nodes: tuple[str, ...]) -> tuple[SchedulerReconciler, Indexer[v1.Project]]:
    state, cache = ClusterState(), Indexer[v1.Project](PHASE_INDEXERS)
    for name in nodes:
        state.upsert_node(node_status(node(name), cpu="4", memory="8Gi"))
        renewed = lease(name)
        renewed.spec.renew_time.CopyFrom(timestamp(time.time()))
        state.set_lease(renewed)
    recorder = EventRecorder(client, component="test-scheduler", clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    reconciler = SchedulerReconciler(client, cache, state, WorkQueue(clock=CLOCK), recorder, clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    return reconciler, cache


def anti_web(obj: v1.Project) -> v1.Project:
    """`obj` labelled app=web and refusing a node holding another app=web project."""
    obj.metadata.labels["app"] = "web"
    term = obj.spec.affinity.project_anti_affinity.required.add(topology_key=HOSTNAME)
    term.label_selector.match_labels["app"] = "web"
    return obj


async def pending_in_cache(client: FakeClient, cache: Indexer[v1.Project], obj: v1.Project) -> v1.Project:
    stored = await client.projects.create(obj)
    stored.status.phase = v1.PENDING
    stored = await client.projects.update_status(stored)
    cache.upsert(meta.key_of(stored), stored)
    return stored


async def test_the_scheduler_binds_two_projects_of_the_same_name_in_two_namespaces() -> None:
    client = FakeClient()
    reconciler, cache = scheduler(client, ("n1",))
    for namespace in ("team-a", "team-b"):
        stored = await pending_in_cache(client, cache, project("web", namespace=namespace, requests={"cpu": "1"}))
        reconciler.wake(stored)
    await reconciler.reconcile("team-a/web")
    await reconciler.reconcile("team-b/web")
    bound = {meta.key_of(p): p.status.node_ref for p in await client.projects.list()}
    assert bound == {"team-a/web": "n1", "team-b/web": "n1"}
    assert (
        reconciler.bound == 2
        and reconciler.state.is_assumed("team-a/web")
        and reconciler.state.is_assumed("team-b/web")
    )


async def test_anti_affinity_terms_select_projects_of_their_own_namespace_only() -> None:
    client = FakeClient()
    reconciler, cache = scheduler(client, ("n1",))
    placed = anti_web(project("db", namespace="team-a", requests={"cpu": "1"}))
    placed.metadata.uid, placed.metadata.generation = "u-placed", 1
    placed.status.phase, placed.status.node_ref = v1.RUNNING, "n1"
    reconciler.state.observe_project(None, placed)
    other = await pending_in_cache(client, cache, anti_web(project("web", namespace="team-b")))
    same = await pending_in_cache(client, cache, anti_web(project("web", namespace="team-a")))
    for obj in (other, same):
        reconciler.wake(obj)
        await reconciler.reconcile(meta.key_of(obj))
    assert (await client.projects.get("team-b/web")).status.node_ref == "n1"  # team-a's rule does not reach it
    refused = await client.projects.get("team-a/web")
    assert not refused.status.node_ref
    assert "anti-affinity" in refused.status.conditions[-1].message


def replica_set(namespace: str) -> v1.ProjectSet:
    obj = v1.ProjectSet()
    obj.metadata.name, obj.metadata.namespace = "web", namespace
    obj.spec.replicas = 2
    obj.spec.selector.match_labels["app"] = "web"
    obj.spec.template.labels["app"] = "web"
    obj.spec.template.spec.services.add(name="main", image="busybox:v1", command=["sleep", "3600"])
    return obj


async def test_projectsets_of_the_same_name_create_replicas_in_their_own_namespace() -> None:
    client = FakeClient()
    sets, projects = Indexer[v1.ProjectSet](), Indexer[v1.Project]({SET_INDEX: set_index})
    recorder = EventRecorder(client, component="test-projectset", clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    suffixes = iter(f"s{i}" for i in range(100))
    reconciler = ProjectSetReconciler(client, sets, projects, recorder, clock=CLOCK, suffix=lambda: next(suffixes))  # type: ignore[arg-type]  # the fake stands in for the client
    for namespace in ("team-a", "team-b"):
        stored = await client.projectsets.create(replica_set(namespace))
        sets.upsert(meta.key_of(stored), stored)
    await reconciler.reconcile("team-a/web")
    made = list(await client.projects.list())
    assert {p.metadata.namespace for p in made} == {"team-a"} and len(made) == 2
    for p in made:
        projects.upsert(meta.key_of(p), p)
    assert set_index(made[0]) == ["team-a/web"]
    await reconciler.reconcile("team-b/web")
    made = list(await client.projects.list())
    assert sorted(p.metadata.namespace for p in made) == ["team-a", "team-a", "team-b", "team-b"]
    events = list(await client.events.list())
    assert {(e.metadata.namespace, e.spec.involved_object.namespace) for e in events} == {
        ("team-a", "team-a"),
        ("team-b", "team-b"),
    }


async def test_a_set_in_a_namespace_being_deleted_stops_making_replicas_without_retrying(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = FakeClient()
    sets, projects = Indexer[v1.ProjectSet](), Indexer[v1.Project]({SET_INDEX: set_index})
    recorder = EventRecorder(client, component="test-projectset", clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    reconciler = ProjectSetReconciler(client, sets, projects, recorder, clock=CLOCK, suffix=lambda: "s0")  # type: ignore[arg-type]  # the fake stands in for the client
    stored = await client.projectsets.create(replica_set("going"))
    sets.upsert(meta.key_of(stored), stored)

    async def refused(obj: v1.Project) -> v1.Project:
        raise FailedPrecondition(f"namespace {obj.metadata.namespace} is being deleted")

    monkeypatch.setattr(client.projects, "create", refused)
    result = await reconciler.reconcile("going/web")  # no error to retry with backoff
    assert result.requeue_after is None or result.requeue_after > 0
    assert not reconciler.expectations.pending("going/web", lambda key: False, now=CLOCK.now())  # nothing awaited
    assert list(await client.projects.list()) == []
    assert not [e for e in await client.events.list() if e.spec.reason == "ReplicasCreated"]


async def test_the_gc_deletes_the_terminated_project_of_its_key_only() -> None:
    client = FakeClient()
    cache, nodes = Indexer[v1.Project](NODE_REF_INDEXERS), Indexer[v1.Node]()
    recorder = EventRecorder(client, component="test-gc", clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    reconciler = GCReconciler(client, cache, nodes, recorder, clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    for namespace in ("team-a", "team-b"):
        stored = await client.projects.create(project("job", namespace=namespace))
        if namespace == "team-a":
            meta.set_phase(stored, v1.TERMINATED, reason="Done", message="done", now=CLOCK.now() - 60)
            stored = await client.projects.update_status(stored)
        cache.upsert(meta.key_of(stored), stored)
    await reconciler.reconcile("team-a/job")
    assert [meta.key_of(p) for p in await client.projects.list()] == ["team-b/job"]


def owned(name: str, namespace: str, owner: v1.ProjectSet) -> Node:
    obj = project(name, namespace=namespace)
    obj.metadata.uid = f"u-{namespace}-{name}"
    meta.set_owner(obj, owner, controller=True)
    return Node(meta.KINDS["projects"], obj)


def test_an_owner_in_another_namespace_is_not_an_owner() -> None:
    owner = replica_set("team-a")
    owner.metadata.uid = "u-set"
    graph = OwnerGraph.of(
        [
            Node(meta.KINDS["projectsets"], owner),
            here := owned("r1", "team-a", owner),
            there := owned("r1", "team-b", owner),
        ]
    )
    assert plan_dependent(here, graph) is Action.KEEP
    assert plan_dependent(there, graph) is Action.DELETE  # the uid names an object of team-a: not its owner
    assert graph.dependents["u-set"] == [here]


async def test_the_owner_collector_reads_an_owner_in_the_dependents_namespace() -> None:
    client = FakeClient()
    owner = await client.projectsets.create(replica_set("team-a"))
    await client.projectsets.create(replica_set("team-b"))  # same name elsewhere: not the owner of team-a's replica
    collector = OwnerCollector(client, SharedInformerFactory(client))  # type: ignore[arg-type]  # the fake stands in for the client
    dependent = owned("r1", "team-a", owner)
    assert await collector._owner_exists(dependent.obj.metadata.owner_references[0], dependent)
    stray = owned("r1", "team-b", owner)  # names team-a's uid: team-b's "web" has another uid
    assert not await collector._owner_exists(stray.obj.metadata.owner_references[0], stray)


async def test_events_go_in_the_namespace_of_their_object() -> None:
    client = FakeClient()
    recorder = EventRecorder(client, component="test", clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    web = await client.projects.create(project("web", namespace="team-a"))
    on_project = await recorder.normal(web, "Tested", "about a project")
    on_node = await recorder.warning(await client.nodes.create(node("n1")), "Tested", "about a node")
    assert on_project is not None and on_node is not None
    assert (on_project.metadata.namespace, on_project.spec.involved_object.namespace) == ("team-a", "team-a")
    assert (on_node.metadata.namespace, on_node.spec.involved_object.namespace) == ("default", "")
    again = await recorder.normal(web, "Tested", "about a project")  # aggregated: the same event, counted twice
    assert again is not None and again.metadata.name == on_project.metadata.name and again.spec.count == 2


async def test_a_terminating_namespace_is_emptied_then_deleted_again() -> None:
    client = FakeClient()
    namespace = v1.Namespace()
    namespace.metadata.name = "team-a"
    namespace.metadata.finalizers.append("test/hold")  # the fake has no namespace rules: this keeps it marked
    await client.namespaces.create(namespace)
    await client.namespaces.delete("team-a")
    held = project("web", namespace="team-a")
    held.metadata.finalizers.append("example.com/stop")
    await client.projects.create(held)
    secret = v1.Secret()
    secret.metadata.name, secret.metadata.namespace = "token", "team-a"
    await client.secrets.create(secret)
    await client.projects.create(project("web", namespace="team-b"))
    cache = Indexer[v1.Namespace]()
    cache.upsert("team-a", await client.namespaces.get("team-a"))
    reconciler = NamespaceReconciler(client, cache, clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    asked: list[str] = []
    delete = client.namespaces.delete

    async def recording_delete(name: str, **options: Any) -> Any:
        asked.append(name)
        return await delete(name, **options)

    client.namespaces.delete = recording_delete  # type: ignore[method-assign]  # records the controller's Deletes

    result = await reconciler.reconcile("team-a")
    assert result.requeue_after == reconciler.initial_backoff
    assert [meta.key_of(s) for s in await client.secrets.list()] == []
    marked = await client.projects.get("team-a/web")
    assert marked.metadata.HasField("deletion_timestamp")  # its finalizer holds it
    condition = meta.get_condition((await client.namespaces.get("team-a")).status.conditions, "ContentRemaining")
    assert condition is not None and condition.type == CONDITION_CONTENT_REMAINING
    assert condition.message == "projects: 1, secrets: 1"  # the secret was listed before it went
    assert (await reconciler.reconcile("team-a")).requeue_after == 2 * reconciler.initial_backoff  # backing off
    assert asked == []  # not while something is left

    marked.metadata.finalizers.remove("example.com/stop")
    await client.projects.update(marked)
    await reconciler.reconcile("team-a")
    assert [meta.key_of(p) for p in await client.projects.list()] == ["team-b/web"]  # team-b untouched
    assert reconciler.deleted == {"projects": 1, "secrets": 1}
    assert asked == ["team-a"]  # empty: deleted again, which removes it on a real apiserver


async def test_a_namespace_not_being_deleted_is_left_alone() -> None:
    client = FakeClient()
    namespace = v1.Namespace()
    namespace.metadata.name = "team-a"
    stored = await client.namespaces.create(namespace)
    await client.projects.create(project("web", namespace="team-a"))
    cache = Indexer[v1.Namespace]()
    cache.upsert("team-a", stored)
    reconciler = NamespaceReconciler(client, cache, clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    assert (await reconciler.reconcile("team-a")).requeue_after is None
    assert (await reconciler.reconcile("gone")).requeue_after is None
    assert [meta.key_of(p) for p in await client.projects.list()] == ["team-a/web"]


def test_messages_and_tie_breaks_show_a_default_project_by_its_name() -> None:
    assert shown("default/web") == "web" and shown("web") == "web"
    assert shown("team-a/web") == "team-a/web"
    assert tie_break_key("default/web", "n1") == tie_break_key("web", "n1")  # the node order it had before
    assert tie_break_key("team-a/web", "n1") != tie_break_key("web", "n1")


def test_a_project_deleted_from_a_terminating_namespace_wakes_that_namespace() -> None:
    namespaces = Indexer[v1.Namespace]()
    for name, deleting in (("team-a", True), ("team-b", False)):
        namespace = v1.Namespace()
        namespace.metadata.name = name
        if deleting:
            namespace.metadata.deletion_timestamp.CopyFrom(timestamp(CLOCK.now()))
        namespaces.upsert(name, namespace)
    queue: WorkQueue[str] = WorkQueue(clock=CLOCK)
    handler = namespace_of_deleted_project(namespaces)(queue)
    for namespace_name in ("team-a", "team-b", "gone"):
        handler.on_delete(project("web", namespace=namespace_name))
    assert len(queue) == 1  # only team-a, the namespace being deleted


async def test_a_cluster_wide_dependent_finds_its_namespaced_owner_in_any_namespace() -> None:
    client = FakeClient()
    owner = await client.projectsets.create(replica_set("team-a"))
    dependent = node("n1")
    dependent.metadata.uid = "u-node"
    meta.set_owner(dependent, owner, controller=False)
    wide = Node(meta.KINDS["nodes"], dependent)
    graph = OwnerGraph.of([Node(meta.KINDS["projectsets"], owner), wide])
    assert plan_dependent(wide, graph) is Action.KEEP and graph.dependents[owner.metadata.uid] == [wide]
    collector = OwnerCollector(client, SharedInformerFactory(client))  # type: ignore[arg-type]  # the fake stands in for the client
    ref = dependent.metadata.owner_references[0]
    assert await collector._owner_exists(ref, wide)  # found in team-a by name and uid
    await client.projectsets.delete("team-a/web")
    await client.projectsets.create(replica_set("team-b"))  # the same name, another uid: not the owner
    assert not await collector._owner_exists(ref, wide)
