"""Nodes: state NotReady on create, no delete while projects are bound (unless forced), a node reaching only its
own Node. Rules: taints well-formed and each key:effect once; status with a known state, well-formed conditions,
quantities and addresses, restore rates per BackupRepository name (quantities) and image sizes not negative.

NodeRestriction (`node_restricted`, as Kubernetes' admission plugin of that name): a node identity writing its own
Node may never change what an admin decides about it, so a node cannot undo its own quarantine:

* **Taints and cordon**: `spec.taints` and `spec.unschedulable` stay as stored (on create: none, not cordoned is
  also fine; a node may create itself tainted or cordoned, never remove either later).
* **Labels**: after creation a node may add, change or remove only its own labels: keys under
  `node.caravanserai.io/` and the automatic `caravanserai.io/hostname`, `/os`, `/arch`. Every other label is
  the admin's (`caractrl label node`). At creation (registration) it may also set labels outside the
  `caravanserai.io` namespace (`cara-agent --label zone=eu`), as a kubelet sets its `--node-labels`; the
  `caravanserai.io` namespace (e.g. `dedicated.caravanserai.io/db`) is the admin's alone, so an admin can pick
  nodes by a label no node can give itself.
* **Addresses**: at most one of each type, InternalIP and ExternalIP an IP address. No ingress trusts an address
  a node reports: internal traffic is proven by the forwarding node's identity (`agent/ingress/hop.py`).

The autoscaler's exception (`autoscaler_allows`, for identity `controller:autoscaler`; every other controller
writes only a Node's status): it may

* **join** a Node to a node group: an update that sets the `caravanserai.io/nodegroup` label on a Node without
  one, and may add other labels and taints at the same time (the template's, which its agent could not set:
  NodeRestriction), but changes or removes nothing already there;
* **cordon or uncordon** a Node of a group: an update of a Node carrying the group label that changes only
  `spec.unschedulable` (so it never moves a node to another group, nor strips the label);
* **delete** a Node of a group, never forced (the apiserver then refuses while projects are bound there).

A node cannot give itself the group label (NodeRestriction keeps the `caravanserai.io` namespace for admins), so
a node cannot make itself a Node the autoscaler may cordon or delete.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from caravanserai import meta, v1
from caravanserai.apiserver import codec, validation
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.errors import FailedPrecondition, FieldViolation
from caravanserai.text.selectors import FieldSelector, validate_dns_subdomain, validate_label_key, validate_label_value
from caravanserai.text.violations import Violations, key_path

KIND = meta.KINDS["nodes"]

NODE_LABEL_PREFIX = "node.caravanserai.io/"
"""Labels under this prefix belong to the node: its agent may set them at any time."""
AUTOMATIC_LABELS = frozenset({"caravanserai.io/hostname", "caravanserai.io/os", "caravanserai.io/arch"})
"""The labels every agent sets on its Node (`agent/host/extended.py`), kept up to date by it."""
ADMIN_NAMESPACE = "caravanserai.io"
"""Label keys with this prefix (or a subdomain of it), other than the node's own, only an admin may set."""


def node_owned_label(key: str) -> bool:
    """Whether a node may set, change or remove the label `key` on its own Node at any time."""
    return key.startswith(NODE_LABEL_PREFIX) or key in AUTOMATIC_LABELS


def admin_label(key: str) -> bool:
    """Whether only an admin may set `key`, even at a node's registration: the `caravanserai.io` namespace."""
    prefix = key.partition("/")[0] if "/" in key else ""
    return (prefix == ADMIN_NAMESPACE or prefix.endswith("." + ADMIN_NAMESPACE)) and not node_owned_label(key)


def node_restricted(verb: str, obj: v1.Node, old: v1.Node | None) -> list[FieldViolation]:
    """NodeRestriction (module docstring): the fields a node may not write in this `verb` of its own Node."""
    if verb == "create":
        return _created_labels(obj)
    if verb == "update" and old is not None:
        return _changed_admin_fields(obj, old)
    if verb == "update_status":
        return _addresses(obj.status.network.addresses)
    return []


def _created_labels(obj: v1.Node) -> list[FieldViolation]:
    return [
        FieldViolation(key_path("metadata.labels", key), "a node may not give itself a label of the caravanserai.io "
                       "namespace (only its own node.caravanserai.io/ ones); an admin sets it: caractrl label node")
        for key in sorted(obj.metadata.labels)
        if admin_label(key)
    ]  # fmt: skip


def _changed_admin_fields(obj: v1.Node, old: v1.Node) -> list[FieldViolation]:
    found: list[FieldViolation] = []
    if list(obj.spec.taints) != list(old.spec.taints):
        found.append(FieldViolation("spec.taints", "only an admin may change a node's taints (caractrl taint)"))
    if obj.spec.unschedulable != old.spec.unschedulable:
        found.append(FieldViolation("spec.unschedulable", "only an admin may cordon or uncordon a node"))
    new_labels, old_labels = dict(obj.metadata.labels), dict(old.metadata.labels)
    for key in sorted(set(new_labels) | set(old_labels)):
        if not node_owned_label(key) and new_labels.get(key) != old_labels.get(key):
            found.append(
                FieldViolation(
                    key_path("metadata.labels", key),
                    f"a node may change only its own labels ({NODE_LABEL_PREFIX}…); an admin sets this one",
                )
            )
    return found


def _addresses(addresses: Sequence[v1.NodeAddress]) -> list[FieldViolation]:
    found: list[FieldViolation] = []
    seen: set[str] = set()
    for i, address in enumerate(addresses):
        path = f"status.network.addresses[{i}]"
        if address.type in seen:
            found.append(FieldViolation(f"{path}.type", f"a node reports at most one {address.type} address"))
        seen.add(address.type)
        if address.type in ("InternalIP", "ExternalIP") and not _is_ip(address.address):
            found.append(FieldViolation(f"{path}.address", f"{address.type} must be an IP address"))
    return found


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


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


AUTOSCALER = "autoscaler"
"""The controller name (`controller:autoscaler`) given the exception above."""


def autoscaler_allows(verb: str, obj: v1.Node | None, old: v1.Node | None, *, force: bool) -> bool:
    """The autoscaler's exception (module docstring): join, cordon or uncordon, unforced delete."""
    if verb == "delete":
        return obj is not None and not force and bool(obj.metadata.labels.get(v1.LABEL_NODE_GROUP))
    if verb != "update" or obj is None or old is None:
        return False
    group, before = obj.metadata.labels.get(v1.LABEL_NODE_GROUP), old.metadata.labels.get(v1.LABEL_NODE_GROUP)
    if not group or (before is not None and before != group):
        return False
    new_labels, old_labels = dict(obj.metadata.labels), dict(old.metadata.labels)
    if any(new_labels.get(key) != value for key, value in old_labels.items()):
        return False  # a label changed or removed
    taints, old_taints = list(obj.spec.taints), list(old.spec.taints)
    if before is None:  # joining: labels and taints may be added
        others_same = taints[: len(old_taints)] == old_taints and obj.spec.unschedulable == old.spec.unschedulable
    else:  # a member: only the cordon may change
        others_same = new_labels == old_labels and taints == old_taints
    return others_same and _same_but_labels_taints_cordon(obj, old)


def _same_but_labels_taints_cordon(obj: v1.Node, old: v1.Node) -> bool:
    a, b = meta.copy(obj), meta.copy(old)
    for node in (a, b):  # the generation follows the spec: it moves with a taint or the cordon
        node.metadata.ClearField("generation")
        node.metadata.ClearField("labels")
        node.spec.ClearField("taints")
        node.spec.unschedulable = False
    return bool(a == b)


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

    def node_restricted(self, node: str, verb: str, obj: v1.Node, old: v1.Node | None) -> list[FieldViolation]:
        return node_restricted(verb, obj, old)

    def controller_allows(
        self, controller: str, verb: str, *, obj: v1.Node | None, old: v1.Node | None, force: bool
    ) -> bool:
        return controller == AUTOSCALER and autoscaler_allows(verb, obj, old, force=force)

    def node_allows(
        self, node: str, verb: str, *, name: str, obj: v1.Node | None, old: v1.Node | None, field_selector: str
    ) -> bool:
        """A node reads every node (no project data: its ingress knows the cluster's node addresses, for hops from
        nodes without certificates and the connection limits' exemption) and writes only its own."""
        if verb in ("get", "list", "watch"):
            return True
        return own_object_allowed(node, verb, name=name, field_selector=field_selector)


STRATEGY = NodeStrategy(KIND)

__all__ = [
    "AUTOSCALER",
    "AUTOMATIC_LABELS",
    "KIND",
    "NODE_LABEL_PREFIX",
    "STRATEGY",
    "NodeStrategy",
    "admin_label",
    "autoscaler_allows",
    "node_owned_label",
    "node_restricted",
    "node_spec",
    "node_status",
    "own_object_allowed",
]
