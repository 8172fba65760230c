"""The WebFarm operator: keep `spec.replicas` projects made from a template, built on the handler layer
(`caravanserai.operator`) of the public library.

A WebFarm (kind defined from webfarm.proto, group example.com) named `web` with `replicas: 3` owns the
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
  deletes the projects of a deleted set, as the Delete's propagation policy says (`caractrl delete wf web
  --cascade=foreground` keeps the set until its projects are gone; `--cascade=orphan` keeps the projects). The
  controller only manages projects whose controller reference carries the set's uid: those of an earlier set of
  the same name are left to the collector.
* the operator `owns` its projects: a change of one (deleted, Terminated, Running) reconciles its set, and the
  level handler `converge` (run at every reconcile of a live set) brings the projects and the status in line.

    python examples/webfarm/webfarm_controller.py --server 127.0.0.1:7420 --leader-elect

The deployment installs the kind's definition first (`caractrl define --proto examples/webfarm/webfarm.proto
--kind WebFarm --group example.com --short-name wf --column DESIRED=.spec.replicas --column
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

from caravanserai import meta, v1
from caravanserai.client import Client, DefinitionMissing, IncompatibleDefinition
from caravanserai.clock import Clock, SystemClock
from caravanserai.controller import EventRecorder, LeaderElectionConfig, Manager
from caravanserai.customkinds.protoc import load_proto
from caravanserai.errors import AlreadyExists, Conflict, NotFound
from caravanserai.operator import Context, Operator, Requeue
from caravanserai.process.logging import configure_logging

GROUP = "example.com"
COMPONENT = "webfarm-controller"
LEGACY_FINALIZER = "example.com/webfarm-cleanup"  # put on sets by earlier versions; removed on sight
PROTO = pathlib.Path(__file__).with_name("webfarm.proto")
messages = load_proto(str(PROTO))  # WebFarm, WebFarmSpec, WebFarmStatus, ProjectTemplate
WebFarm = messages.WebFarm
IN_PLACE = 0  # UpdatePolicy.IN_PLACE
REPLACEMENT_POLL = 1.0  # seconds between looks while a replaced project's record is still there


async def register_kind(client: Client) -> None:
    """Register WebFarm with the definition the deployment installed: DefinitionMissing when none is served,
    IncompatibleDefinition (naming the fields) when it does not fit this build's classes."""
    await client.register(WebFarm, spec=messages.WebFarmSpec, status=messages.WebFarmStatus, group=GROUP)


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


def operator(client: Any, *, clock: Clock | None = None) -> Operator[Any]:
    """The WebFarm operator: one level handler converging each live set (a Client, or a FakeClient in tests)."""
    clock = clock or SystemClock()
    sets: Operator[Any] = Operator("webfarm", WebFarm, client, clock=clock, retired_finalizers=[LEGACY_FINALIZER])
    sets.owns(v1.Project)  # a project of a set changed → reconcile its set
    projects = client.projects
    recorder = EventRecorder(client, component=COMPONENT, clock=clock)

    @sets.on_reconcile()
    async def converge(ctx: Context[Any]) -> Requeue | None:
        """Create missing, update stale, delete surplus projects, then count them into the status."""
        obj, waiting = ctx.obj, False
        listed = await projects.list()
        owned = {p.metadata.name: p for p in listed.items if meta.is_owned_by(p, obj)}  # by uid, not only name
        wanted = replica_names(obj)
        for name in wanted:
            project = owned.get(name)
            if project is None:
                with contextlib.suppress(AlreadyExists):  # one of an earlier set of that name: left to the collector
                    await projects.create(desired_project(obj, name))
                    await recorder.normal(obj, "Created", f"created project {name}")
            elif project.metadata.HasField("deletion_timestamp") or project.status.phase == v1.TERMINATED:
                waiting = True  # replaced once its record is gone
                await remove_terminated(project)
            elif obj.spec.update_policy == IN_PLACE:
                await update_template(obj, project)
        for name in sorted(set(owned) - set(wanted)):
            await scale_down(obj, owned[name])
        write_status(ctx, [p for n, p in owned.items() if n in wanted], len(wanted))
        return Requeue(after=REPLACEMENT_POLL) if waiting else None

    async def update_template(obj: Any, project: v1.Project) -> None:
        wanted = desired_project(obj, project.metadata.name)
        labels = project.metadata.labels
        if project.spec == wanted.spec and all(labels.get(k) == v for k, v in wanted.metadata.labels.items()):
            return
        updated = meta.copy(project)
        updated.spec.CopyFrom(wanted.spec)
        updated.metadata.labels.update(wanted.metadata.labels)
        try:
            await projects.update(updated)
        except (Conflict, NotFound):
            return  # the project's change reconciles the set again
        await recorder.normal(obj, "Updated", f"updated project {project.metadata.name} to the template")

    async def remove_terminated(project: v1.Project) -> None:
        if project.status.phase == v1.TERMINATED:  # removed here, so nothing waits for the garbage collector
            with contextlib.suppress(NotFound, Conflict):
                await projects.delete(project.metadata.name, resource_version=project.metadata.resource_version)

    async def scale_down(obj: Any, project: v1.Project) -> None:
        if project.metadata.HasField("deletion_timestamp"):
            await remove_terminated(project)
            return
        with contextlib.suppress(NotFound):
            await projects.delete(project.metadata.name)
            await recorder.normal(obj, "ScaledDown", f"deleted project {project.metadata.name}")

    def write_status(ctx: Context[Any], owned: list[v1.Project], wanted: int) -> None:
        live = [p for p in owned if not p.metadata.HasField("deletion_timestamp")]
        ready = sum(1 for p in live if p.status.phase == v1.RUNNING)
        ctx.status.replicas, ctx.status.ready_replicas = len(live), ready
        ctx.status.observed_generation = ctx.obj.metadata.generation
        all_ready = ready == wanted
        meta.set_condition(
            ctx.status.conditions,
            "Ready",
            v1.TRUE if all_ready else v1.FALSE,
            reason="AllReplicasRunning" if all_ready else "ReplicasNotRunning",
            message=f"{ready}/{wanted} projects Running",
            now=ctx.now,
        )

    return sets


def build(
    client: Client,
    *,
    clock: Clock | None = None,
    metrics_port: int | None = None,
    leader_election: LeaderElectionConfig | None = None,
    workers: int = 2,
) -> Manager:
    """The manager running the WebFarm operator (informers on sets and on projects, through `setup`)."""
    clock = clock or SystemClock()
    manager = Manager(client, clock=clock, metrics_port=metrics_port, leader_election=leader_election)
    operator(client, clock=clock).setup(manager, max_concurrent_reconciles=workers)
    return manager


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Keep the projects of every WebFarm in existence.")
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
