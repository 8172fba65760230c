"""The ProjectSet operator: keep `spec.replicas` projects made from a template, built only on the public library.

A ProjectSet (kind defined from projectset.proto, group example.com) named `web` with `replicas: 3` owns the
projects `web-0`, `web-1`, `web-2`:

* a missing project is created from `spec.template` (labels: the template's and the set's selector; an owner
  reference to the set with `controller: true`); a deleted one is replaced once its record is gone (Terminated
  projects of the set are removed by the controller itself, so nothing waits for the garbage collector);
* projects beyond `replicas` are deleted (scale down); with `updatePolicy: IN_PLACE` a changed template is
  written into every existing project (the agents recreate the changed services), with `ON_DELETE` only new
  projects get it;
* `status.replicas`, `status.readyReplicas` (projects Running), `status.observedGeneration` and a `Ready`
  condition (True when every wanted project is Running) are kept up to date;
* ownership is by reference (`metadata.ownerReferences`, `meta.set_owner`): the garbage collector (`cara-gc`)
  deletes the projects of a deleted set, as the Delete's propagation policy says (`caractrl delete ps web
  --cascade=foreground` keeps the set until its projects are gone; `--cascade=orphan` keeps the projects). The
  controller only manages projects whose controller reference carries the set's uid: those of an earlier set of
  the same name are left to the collector.

    python examples/projectset/projectset_controller.py --server 127.0.0.1:7420 --leader-elect

The deployment installs the kind's definition first (`caractrl define --proto examples/projectset/projectset.proto
--kind ProjectSet --group example.com --short-name ps --column DESIRED=.spec.replicas --column
READY=.status.readyReplicas`, or `caractrl apply -f` of its manifest); at start the operator only registers its
classes and checks that the served definition is compatible with them (`Client.register`), so an older build of
it runs against a newer definition (a rollback). docs/custom-kinds.md walks through this file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pathlib
from collections.abc import Sequence
from typing import Any

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client, DefinitionMissing, IncompatibleDefinition
from caravanserai.clock import Clock, SystemClock
from caravanserai.controller import Controller, EventRecorder, LeaderElectionConfig, Manager, Result, enqueue_mapped
from caravanserai.customkinds.protoc import load_proto
from caravanserai.errors import AlreadyExists, Conflict, NotFound
from caravanserai.informer import CacheReader
from caravanserai.process.logging import configure_logging

log = structlog.get_logger(__name__)

GROUP = "example.com"
COMPONENT = "projectset-controller"
LEGACY_FINALIZER = "example.com/projectset-cleanup"  # put on sets by earlier versions; removed on sight
PROTO = pathlib.Path(__file__).with_name("projectset.proto")
messages = load_proto(str(PROTO))  # ProjectSet, ProjectSetSpec, ProjectSetStatus, ProjectTemplate
ProjectSet = messages.ProjectSet
IN_PLACE = 0  # UpdatePolicy.IN_PLACE


async def register_kind(client: Client) -> None:
    """Register ProjectSet with the definition the deployment installed: DefinitionMissing when none is served,
    IncompatibleDefinition (naming the fields) when it does not fit this build's classes."""
    await client.register(ProjectSet, spec=messages.ProjectSetSpec, status=messages.ProjectSetStatus, group=GROUP)


def replica_names(obj: Any) -> list[str]:
    return [f"{obj.metadata.name}-{i}" for i in range(max(0, obj.spec.replicas))]


def desired_project(obj: Any, name: str) -> v1.Project:
    """The project `name` of set `obj` as its template says."""
    project = meta.with_type_meta(v1.Project())
    project.metadata.name = name
    project.metadata.labels.update(obj.spec.template.labels)
    project.metadata.labels.update(obj.spec.selector)
    meta.set_owner(project, obj, controller=True)  # the garbage collector deletes it with the set
    project.spec.CopyFrom(obj.spec.template.spec)
    return project


class ProjectSetReconciler:
    """Reconciles one set (the key is its name) against the projects it controls (owner reference, by uid)."""

    def __init__(
        self,
        client: Client,
        sets: CacheReader[Any],
        projects: CacheReader[v1.Project],
        recorder: EventRecorder,
        *,
        clock: Clock,
    ) -> None:
        self._client = client
        self._sets = client.resource(ProjectSet)
        self._set_cache = sets
        self._projects = projects
        self._recorder = recorder
        self._clock = clock

    def owned(self, obj: Any) -> dict[str, v1.Project]:
        """The projects whose controller reference names this very set (its uid, not only its name)."""
        return {
            p.metadata.name: p for p in self._projects.by_index("set", obj.metadata.name) if meta.is_owned_by(p, obj)
        }

    async def reconcile(self, key: str) -> Result:
        obj = self._set_cache.get(key)
        if obj is not None and LEGACY_FINALIZER in obj.metadata.finalizers:  # also on a set being deleted
            fresh = meta.copy(obj)
            fresh.metadata.finalizers.remove(LEGACY_FINALIZER)
            with contextlib.suppress(NotFound):
                await self._sets.update(fresh)
            return Result()  # the update brings us back
        if obj is None or obj.metadata.HasField("deletion_timestamp"):
            return Result()  # the garbage collector deletes (or orphans) its projects
        waiting = await self._converge(obj, self.owned(obj))
        await self._write_status(obj, self.owned(obj))
        return Result(requeue_after=1.0) if waiting else Result()

    async def _converge(self, obj: Any, owned: dict[str, v1.Project]) -> bool:
        """Create missing, update stale, delete surplus projects; True while a replacement waits for a record."""
        wanted = replica_names(obj)
        waiting = False
        for name in wanted:
            project = owned.get(name)
            if project is None:
                await self._create(obj, name)
            elif project.metadata.HasField("deletion_timestamp") or project.status.phase == v1.TERMINATED:
                waiting = True
                await self._remove_terminated(project)
            elif obj.spec.update_policy == IN_PLACE:
                await self._update_template(obj, project)
        for name in sorted(set(owned) - set(wanted)):
            await self._delete(owned[name], obj, reason="ScaledDown")
        return waiting

    async def _create(self, obj: Any, name: str) -> None:
        try:
            await self._client.projects.create(desired_project(obj, name))
        except AlreadyExists:
            return  # the informer has not seen it yet; the next reconcile will
        await self._recorder.normal(obj, "Created", f"created project {name}")

    async def _update_template(self, obj: Any, project: v1.Project) -> None:
        wanted = desired_project(obj, project.metadata.name)
        if project.spec == wanted.spec and all(
            project.metadata.labels.get(k) == v for k, v in wanted.metadata.labels.items()
        ):
            return
        updated = meta.copy(project)
        updated.spec.CopyFrom(wanted.spec)
        updated.metadata.labels.update(wanted.metadata.labels)
        try:
            await self._client.projects.update(updated)
        except Conflict:
            return  # a newer version arrives through the informer and reconciles again
        await self._recorder.normal(obj, "Updated", f"updated project {project.metadata.name} to the template")

    async def _remove_terminated(self, project: v1.Project) -> None:
        if project.status.phase == v1.TERMINATED:
            try:
                await self._client.projects.delete(
                    project.metadata.name, resource_version=project.metadata.resource_version
                )
            except (NotFound, Conflict):
                return

    async def _delete(self, project: v1.Project, obj: Any | None, *, reason: str) -> None:
        if project.metadata.HasField("deletion_timestamp"):
            await self._remove_terminated(project)
            return
        try:
            await self._client.projects.delete(project.metadata.name)
        except NotFound:
            return
        if obj is not None:
            await self._recorder.normal(obj, reason, f"deleted project {project.metadata.name}")

    async def _write_status(self, obj: Any, owned: dict[str, v1.Project]) -> None:
        wanted = set(replica_names(obj))
        live = [p for name, p in owned.items() if name in wanted and not p.metadata.HasField("deletion_timestamp")]
        ready = sum(1 for p in live if p.status.phase == v1.RUNNING)
        status = messages.ProjectSetStatus()
        status.replicas, status.ready_replicas = len(live), ready
        status.observed_generation = obj.metadata.generation
        status.conditions.extend(obj.status.conditions)
        all_ready = ready == len(wanted)
        meta.set_condition(
            status.conditions,
            "Ready",
            v1.TRUE if all_ready else v1.FALSE,
            reason="AllReplicasRunning" if all_ready else "ReplicasNotRunning",
            message=f"{ready}/{len(wanted)} projects Running",
            now=self._clock.now(),
        )
        if status == obj.status:
            return
        fresh = meta.copy(obj)
        fresh.status.CopyFrom(status)
        with contextlib.suppress(Conflict):  # a newer set reconciles again
            await self._sets.update_status(fresh)


def owner_of(project: Any) -> list[str]:
    """The name of the set controlling a project (its controller owner reference), if any."""
    owner = meta.controller_of(project)
    return [owner.name] if owner is not None and owner.kind == ProjectSet.DESCRIPTOR.name else []


def build(
    client: Client,
    *,
    clock: Clock | None = None,
    metrics_port: int | None = None,
    leader_election: LeaderElectionConfig | None = None,
    workers: int = 2,
) -> Manager:
    """The manager with the ProjectSet controller: informers on sets and on the sets' projects, events."""
    clock = clock or SystemClock()
    manager = Manager(client, clock=clock, metrics_port=metrics_port, leader_election=leader_election)
    sets = manager.informers.informer(ProjectSet)
    projects = manager.informers.informer(v1.Project, indexers={"set": owner_of})
    recorder = EventRecorder(client, component=COMPONENT, clock=clock)
    reconciler = ProjectSetReconciler(client, sets.cache, projects.cache, recorder, clock=clock)
    controller = Controller("projectset", reconciler, max_concurrent_reconciles=workers, clock=clock)
    controller.watch(sets)  # a set changed → reconcile it
    controller.watch(projects, enqueue_mapped(owner_of))  # a project of a set changed → reconcile its set
    manager.add(controller)
    return manager


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Keep the projects of every ProjectSet in existence.")
    p.add_argument("--server", default=None, help="API address (default $CARA_SERVER or 127.0.0.1:7420)")
    p.add_argument("--metrics-port", type=int, default=0, help="port of /metrics, /healthz, /readyz (0: any)")
    p.add_argument("--leader-elect", action="store_true", help="run only while holding the lease")
    p.add_argument("--lease-name", default=COMPONENT, help="name of the leader election lease")
    p.add_argument("--workers", type=int, default=2, help="concurrent reconciles")
    p.add_argument("--log-level", default="info")
    return p


async def _run(args: argparse.Namespace) -> None:
    election = LeaderElectionConfig(name=args.lease_name) if args.leader_elect else None
    async with Client(args.server) as client:
        await register_kind(client)
        manager = build(client, metrics_port=args.metrics_port, leader_election=election, workers=args.workers)
        manager.install_signal_handlers()  # SIGTERM: drain, release the lease, exit 0
        await manager.run()


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    try:
        asyncio.run(_run(args))
    except (DefinitionMissing, IncompatibleDefinition) as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
