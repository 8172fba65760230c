"""Nodes: state NotReady on create, no delete while projects are bound (unless forced), a node reaching only its
own Node."""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.apiserver import codec, validation
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.errors import FailedPrecondition
from caravanserai.text.selectors import FieldSelector, validate_dns_subdomain

KIND = meta.KINDS["nodes"]


def own_object_allowed(node: str, verb: str, *, name: str, field_selector: str) -> bool:
    """The rule for objects named after the node (its Node and its heartbeat Lease): list/watch only with
    `metadata.name=<itself>`, get/create/update/update_status only of the one named after it."""
    if verb in ("list", "watch"):
        selector = FieldSelector.parse(field_selector)
        return any(r.field == "metadata.name" and r.operator == "=" and r.value == node for r in selector.requirements)
    return verb in ("get", "create", "update", "update_status") and name == node


class NodeStrategy(KindStrategy):
    status_on_create = False
    controller_writes = frozenset({"update_status"})

    def default_new(self, obj: Any, *, now: float) -> None:
        obj.status.state = v1.NODE_NOT_READY

    def validate(self, obj: Any) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=validation.node_spec)

    def validate_status(self, obj: Any) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.node_status)

    async def before_delete(self, ctx: KindContext, obj: Any, *, force: bool) -> None:
        """FailedPrecondition when projects are bound to the node. Reads etcd, not the watch cache: a binding
        acknowledged a moment ago must count even if the cache has not seen it yet."""
        if force:
            return
        node = obj.metadata.name
        busy: list[str] = []
        async for page in ctx.store.pages("projects"):
            for item in page.items:
                project = codec.decode(v1.Project, item.value, item.mod_revision)
                if project.status.node_ref == node and project.status.phase in v1.BOUND_PHASES:
                    busy.append(item.name)
        if busy:
            shown = ", ".join(busy[:5]) + (" …" if len(busy) > 5 else "")
            raise FailedPrecondition(
                f"node {node} still has {len(busy)} project(s) ({shown}); drain it first or delete with --force"
            )

    def node_allows(self, node: str, verb: str, *, name: str, obj: Any, old: Any, field_selector: str) -> bool:
        """A node reads every node (its ingress forwards to the node running a project, and serves Internal hosts to
        the cluster's node addresses) and writes only its own."""
        if verb in ("get", "list", "watch"):
            return True
        return own_object_allowed(node, verb, name=name, field_selector=field_selector)


STRATEGY = NodeStrategy(KIND)

__all__ = ["STRATEGY", "NodeStrategy", "own_object_allowed"]
