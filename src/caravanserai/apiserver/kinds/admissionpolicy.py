"""AdmissionPolicies: admission hooks for kinds served already, built-in (projects, secrets, configs, nodes,
backuprepositories, resourcedefinitions) or custom, as Kubernetes' ValidatingWebhookConfiguration and
MutatingWebhookConfiguration. Only admin writes them; every authenticated identity (nodes too) reads them.

Rules:

* `spec.resources` is required: plural names (DNS labels), each once. Not `admissionpolicies` (a policy's hook
  could lock every admin out of removing it), nor `leases` or `events` (written many times a second by every
  node: a hook on them would slow the whole cluster). A plural no kind serves yet is allowed (a custom kind may be
  defined later).
* `spec.hooks` is required and checked as a definition's `spec.admissionHooks` are (`kindrules.admission.problems`,
  named `spec.hooks[i].…`).

How the apiserver runs them: `apiserver.policies`.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kindrules import admission
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.text.selectors import validate_dns_label, validate_dns_subdomain
from caravanserai.text.violations import Violations, quote

KIND = meta.KINDS["admissionpolicies"]

REFUSED = {
    KIND.plural: "a policy may not hook admissionpolicies (its hook could keep every admin from removing it)",
    "leases": "leases are written too often for admission hooks (every node renews its lease every few seconds)",
    "events": "events are written too often for admission hooks (every component records events all the time)",
}
"""The resources a policy may not name, with the reason given."""
READS = frozenset({"get", "list", "watch"})


def policy_spec(errors: Violations, spec: v1.AdmissionPolicySpec) -> None:
    """The rules of `spec` (module docstring), every violation naming its field."""
    if not spec.resources:
        errors.add("spec.resources", "is required: the plural names of the kinds to hook (e.g. projects)")
    seen: set[str] = set()
    for i, resource in enumerate(spec.resources):
        path = f"spec.resources[{i}]"
        if resource in REFUSED:
            errors.add(path, f"{quote(resource)}: {REFUSED[resource]}")
        elif resource in seen:
            errors.add(path, f"{quote(resource)} is named twice")
        else:
            errors.check(path, validate_dns_label(resource))
        seen.add(resource)
    if not spec.hooks:
        errors.add("spec.hooks", "is required: at least one hook")
    for problem in admission.problems(spec.hooks, path="spec.hooks"):
        errors.add(problem.field, problem.description)


class AdmissionPolicyStrategy(KindStrategy[v1.AdmissionPolicy]):
    """Generic behaviour plus the rules above. Writes: admin only (the authorizer's default); reads: every
    authenticated identity, nodes included (a policy holds no secret: a hook's credentials are its TLS trust)."""

    cache_decoded = True  # every write reads the policies

    def node_allows(
        self,
        node: str,
        verb: str,
        *,
        name: str,
        obj: v1.AdmissionPolicy | None,
        old: v1.AdmissionPolicy | None,
        field_selector: str,
    ) -> bool:
        """A node reads policies (as every authenticated identity does) and writes none."""
        return verb in READS

    def validate(self, obj: v1.AdmissionPolicy) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=policy_spec)

    def validate_status(self, obj: v1.AdmissionPolicy) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)


STRATEGY = AdmissionPolicyStrategy(KIND)

__all__ = ["KIND", "REFUSED", "STRATEGY", "AdmissionPolicyStrategy", "policy_spec"]
