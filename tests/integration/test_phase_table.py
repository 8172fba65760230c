"""The lifecycle table through a real apiserver over a real etcd: every ordered pair of phases, reached by the
paths a real cluster takes (binding, the agent's verdicts, Delete), is stored or refused exactly as
`caravanserai.project.lifecycle` says; deletion and finalizers keep a project from being bound."""

from __future__ import annotations

import itertools
import time

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import FailedPrecondition, NotFound
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project

PATHS = {
    v1.QUEUED: [],  # created while its namespace's quota is full (`reach`)
    v1.PENDING: [],
    v1.SCHEDULED: [v1.SCHEDULED],
    v1.RUNNING: [v1.SCHEDULED, v1.RUNNING],
    v1.SUCCEEDED: [v1.SCHEDULED, v1.SUCCEEDED],
    v1.FAILED: [v1.SCHEDULED, v1.FAILED],
    v1.TERMINATING: [v1.SCHEDULED, "delete"],
    v1.TERMINATED: [v1.SCHEDULED, "delete", v1.TERMINATED],
}


async def _quota(client: Client, projects: str) -> None:
    """The `held` namespace's quota allows `projects` projects (created on first use)."""
    quotas = client.resource(v1.ResourceQuota)
    try:
        q = await quotas.get("held/quota")
    except NotFound:
        await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name="held")))
        q = v1.ResourceQuota(metadata=v1.ObjectMeta(name="quota", namespace="held"))
        q.spec.hard["projects"] = projects
        await quotas.create(q)
        return
    q.spec.hard["projects"] = projects
    await quotas.update(q)


async def reach(client: Client, name: str, phase: str) -> v1.Project:
    if phase == v1.QUEUED:  # held back by a full quota, which then makes room (so admitting it would fit)
        await _quota(client, "0")
        p = await client.projects.create(project(name, namespace="held"))
        await _quota(client, "1000")
        assert p.status.phase == v1.QUEUED
        return p
    p = await client.projects.create(project(name))
    for step in PATHS[phase]:
        if step == "delete":
            await client.projects.delete(name)
            p = await client.projects.get(name)
            continue
        p.status.phase = step
        p.status.node_ref = "n1"
        p = await client.projects.update_status(p)
    assert p.status.phase == phase
    return p


async def test_every_pair_of_phases_through_the_apiserver(client: Client) -> None:
    for i, (before, after) in enumerate(itertools.product(v1.PHASES, repeat=2)):
        name = f"pair{i}"
        p = await reach(client, name, before)
        p.status.phase = after
        p.status.node_ref = "" if after in (v1.QUEUED, v1.PENDING) else "n1"
        if before == after == v1.TERMINATED:
            p.status.services.add(name="late")
        allowed = lifecycle.is_allowed(before, after) and not (after == v1.TERMINATING and before != after)
        if allowed:
            stored = await client.projects.update_status(p)
            assert stored.status.phase == after, (before, after)
        else:
            with pytest.raises(FailedPrecondition):
                await client.projects.update_status(p)
        await client.projects.delete(meta.key_of(p), force=True)


@pytest.mark.parametrize("phase", [v1.RUNNING, v1.FAILED, v1.SUCCEEDED])
async def test_delete_of_a_bound_project_goes_through_terminating(client: Client, phase: str) -> None:
    await reach(client, "bound", phase)
    response = await client.projects.delete("bound")
    assert not response.deleted
    marked = await client.projects.get("bound")
    assert marked.status.phase == v1.TERMINATING and marked.metadata.HasField("deletion_timestamp")
    done = lifecycle.terminate(marked, reason="ResourcesRemoved", message="removed", now=time.time())
    await client.projects.update_status(done)
    await client.projects.delete("bound")
    with pytest.raises(NotFound):
        await client.projects.get("bound")


async def test_pending_project_with_a_finalizer_is_never_bound_once_deleted(client: Client) -> None:
    p = project("kept")
    p.metadata.finalizers.append("example.com/keep")
    await client.projects.create(p)
    response = await client.projects.delete("kept")
    assert not response.deleted
    marked = await client.projects.get("kept")
    assert marked.status.phase == v1.PENDING and marked.metadata.HasField("deletion_timestamp")
    with pytest.raises(FailedPrecondition, match="being deleted"):
        await client.projects.update_status(lifecycle.bind(marked, "n1", now=time.time()))
    marked.metadata.finalizers.remove("example.com/keep")  # the finalizer's owner lets go: the project goes
    await client.projects.update(marked)
    with pytest.raises(NotFound):
        await client.projects.get("kept")


async def test_running_project_with_a_finalizer_stays_until_terminated_and_released(client: Client) -> None:
    p = await client.projects.create(project("fin"))
    p.metadata.finalizers.append("example.com/keep")
    p = await client.projects.update(p)
    p = await client.projects.update_status(lifecycle.bind(p, "n1", now=time.time()))
    await client.projects.delete("fin")
    marked = await client.projects.get("fin")
    assert marked.status.phase == v1.TERMINATING
    terminated = await client.projects.update_status(
        lifecycle.terminate(marked, reason="ResourcesRemoved", message="removed", now=time.time())
    )
    await client.projects.delete("fin")  # Terminated, but the finalizer holds it
    held = await client.projects.get("fin")
    assert held.status.phase == v1.TERMINATED and list(held.metadata.finalizers) == ["example.com/keep"]
    del terminated.metadata.finalizers[:]
    terminated.metadata.resource_version = held.metadata.resource_version
    await client.projects.update(terminated)
    with pytest.raises(NotFound):
        await client.projects.get("fin")
    assert meta.get_condition(held.status.conditions, v1.CONDITION_PHASE).reason == "ResourcesRemoved"
