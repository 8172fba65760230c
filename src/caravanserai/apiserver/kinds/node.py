"""Nodes: state NotReady on create, no delete while projects are bound (unless forced), a node reaching only its
own Node. Rules: taints well-formed and each key:effect once; status with a known state, well-formed conditions,
quantities and addresses, restore rates per BackupRepository name (quantities) and image sizes not negative."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import codec, validation
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.errors import FailedPrecondition
from caravanserai.text.selectors import FieldSelector, validate_dns_subdomain, validate_label_key, validate_label_value
from caravanserai.text.violations import Violations, key_path

KIND = meta.KINDS["nodes"]


def node_spec(errors: Violations, spec: v1.NodeSpec) -> None:
    for i, taint in enumerate(spec.taints):
        if errors.required(f"spec.taints[{i}].key", taint.key):
            errors.check(f"spec.taints[{i}].key", validate_label_key(taint.key), prefix="invalid key: ")
        errors.check(f"spec.taints[{i}].value", validate_label_value(taint.value))
        errors.choice(f"spec.taints[{i}].effect", taint.effect, validation.TAINT_EFFECTS)
    errors.unique(((f"spec.taints[{i}]", f"{t.key}:{t.effect}") for i, t in enumerate(spec.taints)), "taint")


def node_status(errors: Violations, status: v1.NodeStatus) -> None:
    errors.choice("status.state", status.state, v1.NODE_STATES, empty="while unknown")
    validation.conditions(errors, "status.conditions", status.conditions)
    validation.quantities(errors, "status.capacity", status.capacity)
    validation.quantities(errors, "status.allocatable", status.allocatable)
    for i, address in enumerate(status.network.addresses):
        errors.choice(f"status.network.addresses[{i}].type", address.type, ("InternalIP", "ExternalIP", "Hostname"))
        errors.required(f"status.network.addresses[{i}].address", address.address)
    errors.between("status.network.agentPort", status.network.agent_port, 0, 65535)
    for name, text in (("download", status.network.throughput.download), ("upload", status.network.throughput.upload)):
        if text:
            validation.quantity(errors, f"status.network.throughput.{name}", text)
    for repository, rate in status.network.restore_rates.items():  # bytes per second, per BackupRepository
        path = key_path("status.network.restoreRates", repository)
        errors.check(path, validate_dns_subdomain(repository), prefix="invalid BackupRepository name: ")
        validation.quantity(errors, path, rate)
    for i, image in enumerate(status.images):
        errors.non_negative(f"status.images[{i}].sizeBytes", image.size_bytes)


def own_object_allowed(node: str, verb: str, *, name: str, field_selector: str) -> bool:
    """The rule for objects named after the node (its Node and its heartbeat Lease): list/watch only with
    `metadata.name=<itself>`, get/create/update/update_status only of the one named after it."""
    if verb in ("list", "watch"):
        selector = FieldSelector.parse(field_selector)
        return any(r.field == "metadata.name" and r.operator == "=" and r.value == node for r in selector.requirements)
    return verb in ("get", "create", "update", "update_status") and name == node


class NodeStrategy(KindStrategy[v1.Node]):
    status_on_create = False
    controller_writes = frozenset({"update_status"})

    def default_new(self, obj: v1.Node, *, now: float) -> None:
        obj.status.state = v1.NODE_NOT_READY

    def validate(self, obj: v1.Node) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=node_spec)

    def validate_status(self, obj: v1.Node) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=node_status)

    async def before_delete(self, ctx: KindContext, obj: v1.Node, *, force: bool) -> None:
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

    def node_allows(
        self, node: str, verb: str, *, name: str, obj: v1.Node | None, old: v1.Node | None, field_selector: str
    ) -> bool:
        """A node reads every node (its ingress forwards to the node running a project, and serves Internal hosts to
        the cluster's node addresses) and writes only its own."""
        if verb in ("get", "list", "watch"):
            return True
        return own_object_allowed(node, verb, name=name, field_selector=field_selector)


STRATEGY = NodeStrategy(KIND)

__all__ = ["KIND", "STRATEGY", "NodeStrategy", "node_spec", "node_status", "own_object_allowed"]
