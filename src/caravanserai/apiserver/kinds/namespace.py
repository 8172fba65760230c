"""Namespaces: a place per team. Cluster-wide objects whose names are DNS labels; everyone reads them, only an admin
writes them.

Guarantees:

* **Phases.** A new namespace is `Active`. Deleting one marks it `Terminating` (deletion timestamp): no object
  may be created in it any more (`ResourceService`), and the namespace controller of `cara-gc`
  (`controllers/gc/namespaces.py`) deletes what it holds, each object as its own Delete does (finalizers and
  graceful stops honoured). The record goes once nothing is left in it: the controller's next Delete finds it
  empty, or the first Delete of an empty namespace removes it at once.
* **`default` always exists**: the apiserver creates it on start (`apiserver/namespaces.py`) and refuses to
  delete it.
* Status is the server's: a client's status on create is refused, and only the controller identities write it.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import MARK, NOOP, REMOVE, KindContext, KindStrategy, stamp
from caravanserai.errors import FailedPrecondition
from caravanserai.text.selectors import validate_dns_label
from caravanserai.text.violations import Violations

KIND = meta.KINDS["namespaces"]
PHASES = (v1.NAMESPACE_ACTIVE, v1.NAMESPACE_TERMINATING)


def namespace_status(errors: Violations, status: v1.NamespaceStatus) -> None:
    if status.phase:
        errors.choice("status.phase", status.phase, PHASES)
    validation.conditions(errors, "status.conditions", status.conditions)


async def holds_anything(ctx: KindContext, namespace: str) -> bool:
    """Does any namespaced kind served here (custom ones too) still have an object in `namespace`? Reads etcd."""
    assert ctx.kinds is not None, "the service passes its kind table"
    for strategy in ctx.kinds:
        if strategy.kind.cluster_scoped:
            continue
        if (await ctx.store.list(strategy.plural, limit=1, namespace=namespace)).items:
            return True
    return False


class NamespaceStrategy(KindStrategy[v1.Namespace]):
    status_on_create = False
    controller_writes = frozenset({"update_status"})
    cache_decoded = True  # every create and every request's authorization reads its namespace

    def default_new(self, obj: v1.Namespace, *, now: float) -> None:
        obj.status.phase = v1.NAMESPACE_ACTIVE

    def validate(self, obj: v1.Namespace) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_label, spec_rule=validation.no_rules)

    def validate_status(self, obj: v1.Namespace) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=namespace_status)

    def controller_allows(
        self, controller: str, verb: str, *, obj: v1.Namespace | None, old: v1.Namespace | None, force: bool
    ) -> bool:
        """The namespace controller deletes a namespace already marked for deletion (its Delete removes the record
        once nothing is left); it never starts a deletion."""
        return verb == "delete" and obj is not None and obj.metadata.HasField("deletion_timestamp")

    async def before_delete(self, ctx: KindContext, obj: v1.Namespace, *, force: bool) -> None:
        if obj.metadata.name == meta.DEFAULT_NAMESPACE:
            raise FailedPrecondition('the namespace "default" cannot be deleted')

    async def plan_delete(self, ctx: KindContext, obj: v1.Namespace, *, force: bool, now: float) -> str:
        """REMOVE when nothing is left in it and no finalizer holds it; otherwise MARK it (Terminating) once, and
        NOOP while the controller empties it. `force` does not skip the contents: they would be left behind."""
        if not obj.metadata.finalizers and not await holds_anything(ctx, obj.metadata.name):
            return REMOVE
        return NOOP if obj.metadata.HasField("deletion_timestamp") else MARK

    def mark_deleted(self, obj: v1.Namespace, plan: str, *, now: float) -> v1.Namespace:
        marked = meta.copy(obj)
        stamp(marked.metadata.deletion_timestamp, now)
        marked.status.phase = v1.NAMESPACE_TERMINATING
        return marked

    def removable_after_update(self, obj: v1.Namespace) -> bool:
        """A namespace marked for deletion goes through the controller's Delete, which looks at what it holds; an
        update that drops its last finalizer does not remove it by itself."""
        return False


STRATEGY = NamespaceStrategy(KIND)

__all__ = ["KIND", "PHASES", "STRATEGY", "NamespaceStrategy", "holds_anything", "namespace_status"]
