"""Projects: phase Pending on create, the phase table of `caravanserai.project.lifecycle` on UpdateStatus (DESIGN §4),
Terminating on delete while anything may run, nodes reaching only the projects bound to them, and what only an admin
may write (`adminrules`). The rules of a project's spec and status are in `rules` (with `servicerules`,
`datarules` and `runrules`)."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import FINALIZE, MARK, NOOP, REMOVE, KindContext, KindStrategy
from caravanserai.apiserver.kinds.project import quotarules
from caravanserai.apiserver.kinds.project.adminrules import admin_only_fields
from caravanserai.apiserver.kinds.project.rules import project_spec, project_status
from caravanserai.errors import FailedPrecondition, FieldViolation
from caravanserai.project import lifecycle
from caravanserai.storage.store import Also
from caravanserai.text.selectors import validate_dns_label

KIND = meta.KINDS["projects"]


def node_sees(node: str, project: v1.Project) -> bool:
    """Whether node `node` may read `project`: bound to it (`status.nodeRef`, also while a move with data waits for
    its final backups, `status.move`), or being handed over from it (`status.previousNodeRef` with a
    `handoffDeadline`: its old containers still serve). A project bound elsewhere, moved away without a hand-off
    or not bound at all is none of its business: no project spec leaves the nodes that run it."""
    status = project.status
    if not node:
        return False
    return status.node_ref == node or (status.previous_node_ref == node and status.HasField("handoff_deadline"))


class ProjectStrategy(KindStrategy[v1.Project]):
    status_on_create = False
    node_filters = True
    controller_writes = frozenset({"create", "update_status", "delete"})

    def default_new(self, obj: v1.Project, *, now: float) -> None:
        lifecycle.created(obj, now=now)
        default_requests(obj.spec)

    async def companions(
        self, ctx: KindContext, old: v1.Project | None, new: v1.Project | None, *, now: float
    ) -> list[Also]:
        """The namespace's quotas, counted with this write (`quotarules`)."""
        return await quotarules.companions(ctx, old, new, now=now)

    def companion_locks(self, ctx: KindContext, old: v1.Project | None, new: v1.Project | None) -> list[str]:
        """The namespace's and its cohorts' quota locks (`quotarules.locks`)."""
        return quotarules.locks(ctx, old, new)

    def validate(self, obj: v1.Project) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_label, spec_rule=project_spec)

    def validate_status(self, obj: v1.Project) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=project_status)

    def prepare_update(self, old: v1.Project, new: v1.Project) -> v1.Project:
        new = meta.copy(new)
        default_requests(new.spec)
        merged = super().prepare_update(old, new)
        if old.metadata.HasField("deletion_timestamp") and merged.spec != old.spec:
            raise FailedPrecondition(f"project {old.metadata.name} is being deleted; its spec cannot change")
        return merged

    def prepare_status(self, old: v1.Project, new: v1.Project, *, now: float) -> v1.Project:
        """New status, checked against the lifecycle's phase table (which also records phase changes)."""
        merged = super().prepare_status(old, new, now=now)
        lifecycle.check(old, merged, now=now)
        return merged

    def delete_plan(self, obj: v1.Project, *, force: bool) -> str:
        plan = lifecycle.delete_plan(obj, force=force)
        if plan == REMOVE and obj.metadata.finalizers and not force:
            return NOOP if obj.metadata.HasField("deletion_timestamp") else FINALIZE
        return plan

    def mark_deleted(self, obj: v1.Project, plan: str, *, now: float) -> v1.Project:
        return lifecycle.mark_terminating(obj, now=now) if plan == MARK else super().mark_deleted(obj, plan, now=now)

    def removable_after_update(self, obj: v1.Project) -> bool:
        return super().removable_after_update(obj) and obj.status.phase in lifecycle.DELETE_AT_ONCE

    def node_allows(
        self, node: str, verb: str, *, name: str, obj: v1.Project | None, old: v1.Project | None, field_selector: str
    ) -> bool:
        """A node reads the projects it runs (`node_sees`: a get of another project is refused, its lists and
        watches carry only those; its ingress reads Routes instead) and writes the status of projects bound to it:
        while they stay bound, and the one write that unbinds (`finishes_move`)."""
        if verb == "get":
            return obj is not None and node_sees(node, obj)
        if verb in ("list", "watch"):
            return True  # filtered: `node_sees`
        if verb == "update_status":
            if old is None or obj is None or old.status.node_ref != node:
                return False
            return obj.status.node_ref == node or finishes_move(old, obj)
        return False

    def node_sees(self, node: str, obj: v1.Project) -> bool:
        return node_sees(node, obj)

    def admin_only(self, obj: v1.Project) -> list[FieldViolation]:
        """Privileged containers, devices, the host network and HostPath volumes (`adminrules`)."""
        return admin_only_fields(obj.spec)


def finishes_move(old: v1.Project, new: v1.Project) -> bool:
    """Is `new` the status `lifecycle.finish_move` makes of `old`, as far as binding goes: `old` is bound with a move
    asked of it (`status.move`), `new` is Pending (Queued for a reclaim: `lifecycle.lands_in`), unbound and without
    the move? The node a move waits for writes it after the final backups; a node may unbind a project in no other
    way."""
    return (
        bool(old.status.node_ref)
        and old.status.HasField("move")
        and new.status.phase == lifecycle.lands_in(old)
        and not new.status.node_ref
        and not new.status.HasField("move")
    )


def default_requests(spec: v1.ProjectSpec) -> None:
    """Kubernetes' rule: a service that limits a resource without requesting it requests its limit (in place)."""
    for service in spec.services:
        resources = service.resources
        for name, limit in resources.limits.items():
            if name not in resources.requests:
                resources.requests[name] = limit


STRATEGY = ProjectStrategy(KIND)

__all__ = ["KIND", "STRATEGY", "ProjectStrategy", "default_requests", "finishes_move", "node_sees"]
