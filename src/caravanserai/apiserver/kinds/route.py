"""Routes: a project's routing (hosts, node endpoints, scope, hand-off), derived by the routes controller
(`caravanserai.project.routing`, `controllers/routes`) so that a node's ingress reads Routes instead of every
project and node.

Access: admin and `controller:*` identities write them (create, update, delete); every node reads every Route
(get, list, watch: any node's ingress answers for any host and forwards to the node that runs the project) and
writes none; other identities as their roles grant (`view` reads them).

Rules: `spec.project` is required and names the Route's own project (the same name: one Route per project);
each host has a name, a service, a port in 1..65535 and a scope `Public` or `Internal`; ingress ports are in
0..65535. A Route carries nothing of the project's spec but its ingresses.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.project.ingresshosts import INTERNAL, PUBLIC
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations

KIND = meta.KINDS["routes"]
NODE_READS = frozenset({"get", "list", "watch"})


def _endpoint(errors: Violations, path: str, endpoint: v1.RouteEndpoint) -> None:
    errors.between(f"{path}.ingressPort", endpoint.ingress_port, 0, 65535)
    if (endpoint.address or endpoint.addresses) and not endpoint.node:
        errors.add(f"{path}.node", "is required with an address")


def route_spec(errors: Violations, spec: v1.RouteSpec) -> None:
    errors.required("spec.project", spec.project)
    _endpoint(errors, "spec.node", spec.node)
    _endpoint(errors, "spec.previousNode", spec.previous_node)
    for i, host in enumerate(spec.hosts):
        path = f"spec.hosts[{i}]"
        errors.required(f"{path}.host", host.host)
        errors.required(f"{path}.service", host.service)
        errors.between(f"{path}.port", host.port, 1, 65535)
        errors.choice(f"{path}.scope", host.scope, (PUBLIC, INTERNAL))
    errors.unique(((f"spec.hosts[{i}].ingress", h.ingress) for i, h in enumerate(spec.hosts)), "ingress")


class RouteStrategy(KindStrategy[v1.Route]):
    controller_writes = frozenset({"create", "update", "delete"})

    def validate(self, obj: v1.Route) -> None:
        name = obj.metadata.name

        def rules(errors: Violations, spec: v1.RouteSpec) -> None:
            route_spec(errors, spec)
            if spec.project and spec.project != name:
                errors.add("spec.project", f"must be the Route's own name, not {spec.project!r}")

        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=rules)

    def validate_status(self, obj: v1.Route) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)

    def node_allows(
        self, node: str, verb: str, *, name: str, obj: v1.Route | None, old: v1.Route | None, field_selector: str
    ) -> bool:
        """Every node reads every Route; none writes one."""
        return verb in NODE_READS


STRATEGY = RouteStrategy(KIND)

__all__ = ["KIND", "NODE_READS", "STRATEGY", "RouteStrategy", "route_spec"]
