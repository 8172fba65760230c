"""Room freed on a node wakes the Pending projects that fit there now (and those whose rules read other projects),
not every Pending project; a placed project with required anti-affinity leaving wakes them all."""

from __future__ import annotations

import time

from caravanserai import v1
from caravanserai.clock import SystemClock, timestamp
from caravanserai.controller import EventRecorder
from caravanserai.controllers.scheduler import reconciler as reconciler_module
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.reconciler import SchedulerReconciler
from caravanserai.informer import PHASE_INDEXERS, Indexer
from caravanserai.testing import FakeClient
from caravanserai.testing.builders import lease, node, node_status, project
from caravanserai.workqueue import WorkQueue

CLOCK = SystemClock()


def bound(name: str, on: str, cpu: str, **labels: str) -> v1.Project:
    p = project(name, requests={"cpu": cpu}, labels=labels)
    p.metadata.resource_version, p.metadata.generation = "1", 1
    p.status.phase, p.status.node_ref = v1.RUNNING, on
    return p


def setup() -> tuple[ClusterState, Indexer[v1.Project], SchedulerReconciler]:
    state, cache = ClusterState(), Indexer[v1.Project](PHASE_INDEXERS)
    for name in ("n1", "n2"):
        state.upsert_node(node_status(node(name), cpu="4", memory="8Gi"))
        renewed = lease(name)
        renewed.spec.renew_time.CopyFrom(timestamp(time.time()))
        state.set_lease(renewed)
    client = FakeClient()
    recorder = EventRecorder(client, component="test-scheduler", clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    reconciler = SchedulerReconciler(client, cache, state, WorkQueue(clock=CLOCK), recorder, clock=CLOCK)  # type: ignore[arg-type]  # the fake stands in for the client
    for pending in (
        project("fits", requests={"cpu": "1"}),
        project("huge", requests={"cpu": "8"}),
        project("ruled", requests={"cpu": "8"}, labels={"app": "web"}),
    ):
        pending.status.phase = v1.PENDING
        if pending.metadata.name == "ruled":
            term = pending.spec.affinity.project_anti_affinity.preferred.add(weight=10).term
            term.topology_key, term.label_selector.match_labels["app"] = "caravanserai.io/zone", "web"
        cache.upsert(pending.metadata.name, pending)
    return state, cache, reconciler


def test_freed_room_wakes_only_the_projects_that_fit_there_or_read_other_projects() -> None:
    state, _, reconciler = setup()
    full = [bound("big1", "n1", "4"), bound("big2", "n2", "4")]
    for p in full:
        assert not state.observe_project(None, p).freed_on
    change = state.forget_project(full[0])
    assert change.freed_on == {"n1"} and change.freed and not change.anti_moved
    reconciler.wake_fitting(change.freed_on)
    assert {name for name in ("fits", "huge", "ruled") if name in reconciler.active} == {"fits", "ruled"}


def test_many_nodes_at_once_or_a_required_anti_affinity_leaving_wake_every_pending_project(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest's fixture
    state, _, reconciler = setup()
    monkeypatch.setattr(reconciler_module, "WAKE_CHECK_NODES", 1)
    reconciler.wake_fitting({"n1", "n2"})
    assert all(name in reconciler.active for name in ("fits", "huge", "ruled"))

    state, _, reconciler = setup()
    solo = bound("solo", "n1", "100m", app="db")
    solo.spec.affinity.project_anti_affinity.required.add(
        topology_key="caravanserai.io/hostname"
    ).label_selector.match_labels["app"] = "web"
    state.observe_project(None, solo)
    assert state.forget_project(solo).anti_moved  # what it kept off n1 may fit there now, whatever its rules


def test_waking_every_pending_project_reads_only_those_not_waiting_already(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest's fixture
    _, cache, reconciler = setup()
    reconciler.wake_all_pending()
    assert all(name in reconciler.active for name in ("fits", "huge", "ruled"))
    assert reconciler.active.pop() is not None  # one is being decided on: it no longer waits
    asleep = [name for name in ("fits", "huge", "ruled") if name not in reconciler.active]
    read: list[str] = []
    get = cache.get
    monkeypatch.setattr(cache, "get", lambda name: read.append(name) or get(name))
    monkeypatch.setattr(cache, "by_index", None)  # never: the keys are enough to pass over the waiting ones
    reconciler.wake_all_pending()
    assert read == asleep and all(name in reconciler.active for name in ("fits", "huge", "ruled"))
