"""ResourceQuotas: a namespace's share. Usage (`status.used`) is the apiserver's: it is counted in the same etcd
transaction as every project write that changes it (`kinds/project/quotarules.py`); the queue controller recounts
it from a snapshot and writes it with the quota's version (a count made stale by a write meanwhile is refused).

Rules: `spec.hard` names `cpu`, `memory`, `projects` or an extended resource (`nvidia.com/gpu`), each with a
quantity; `spec.policy` is `Queue` (the default, set on create) or `Reject`; `spec.cohort` is a DNS label;
`spec.borrowingLimit` names resources of `spec.hard` with quantities and needs a cohort; `spec.weight` is a number
≥ 0. Status: written by admin and the controller identities only.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver import codec, validation
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.apiserver.kinds.quotabook import MARKS, QUOTAS, mark_key
from caravanserai.errors import FieldViolation, Invalid, NotFound
from caravanserai.project import cohorts, quota
from caravanserai.storage.store import Also
from caravanserai.text.selectors import validate_dns_label, validate_dns_subdomain, validate_label_key
from caravanserai.text.violations import Violations, key_path

KIND = meta.KINDS["resourcequotas"]
POLICIES = (v1.QUOTA_QUEUE, v1.QUOTA_REJECT)


def _amounts(errors: Violations, path: str, values: dict[str, str]) -> None:
    for name, text in values.items():
        at = key_path(path, name)
        errors.check(at, validate_label_key(name), prefix="invalid resource name: ")
        try:
            if quota.amount(name, text) < 0:
                errors.add(at, f"must not be negative, not {text!r}")
        except ValueError as exc:
            errors.add(at, str(exc))


def quota_spec(errors: Violations, spec: v1.ResourceQuotaSpec) -> None:
    if not spec.hard:
        errors.add("spec.hard", 'is required: limits such as cpu: "4", memory: 8Gi, projects: "10"')
    _amounts(errors, "spec.hard", dict(spec.hard))
    errors.choice("spec.policy", spec.policy, POLICIES)
    if spec.cohort:
        errors.check("spec.cohort", validate_dns_label(spec.cohort), prefix="invalid cohort name: ")
    elif spec.borrowing_limit:
        errors.add("spec.borrowingLimit", "needs spec.cohort: a namespace borrows from the other members of its cohort")
    _amounts(errors, "spec.borrowingLimit", dict(spec.borrowing_limit))
    for name in spec.borrowing_limit:
        if name not in spec.hard:
            errors.add(key_path("spec.borrowingLimit", name), "limits borrowing of a resource spec.hard does not name")
    try:
        cohorts.parse_weight(spec.weight)
    except ValueError as exc:
        errors.add("spec.weight", str(exc))


def quota_status(errors: Violations, status: v1.ResourceQuotaStatus) -> None:
    _amounts(errors, "status.hard", dict(status.hard))
    _amounts(errors, "status.used", dict(status.used))
    _amounts(errors, "status.borrowed", dict(status.borrowed))
    errors.non_negative("status.queued", status.queued)


class ResourceQuotaStrategy(KindStrategy[v1.ResourceQuota]):
    controller_writes = frozenset({"update_status"})
    cache_decoded = True  # project writes read the quotas of their namespace

    def default_new(self, obj: v1.ResourceQuota, *, now: float) -> None:
        obj.spec.policy = obj.spec.policy or v1.QUOTA_QUEUE

    def prepare_update(self, old: v1.ResourceQuota, new: v1.ResourceQuota) -> v1.ResourceQuota:
        merged = super().prepare_update(old, new)
        merged.spec.policy = merged.spec.policy or v1.QUOTA_QUEUE
        return merged

    def validate(self, obj: v1.ResourceQuota) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=quota_spec)

    def validate_status(self, obj: v1.ResourceQuota) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=quota_status)

    async def companions(
        self, ctx: KindContext, old: v1.ResourceQuota | None, new: v1.ResourceQuota | None, *, now: float
    ) -> list[Also]:
        """A write that makes a quota join or leave a cohort (create, delete, `spec.cohort` changed) rewrites the
        cohort's marker with it (compare-and-swap, like any write): every project write decided on the cohort's
        membership before it then fails its guard and is decided again (`kinds.quotabook`)."""
        before = old.spec.cohort if old is not None else ""
        after = new.spec.cohort if new is not None else ""
        if before == after:
            return []
        markers = [await _marker(ctx, name) for name in sorted({before, after} - {""})]
        if new is not None and after:
            await _one_per_namespace(ctx, new)  # read after the markers: see `_one_per_namespace`
        return markers


async def _one_per_namespace(ctx: KindContext, joining: v1.ResourceQuota) -> None:
    """Refuse a second quota of one namespace in one cohort (its use would count twice in the cohort's total). The
    namespace's quotas are read after the cohort's marker: of two such writes racing, the one whose read missed the
    other had read the marker before the other rewrote it, so its own rewrite fails and it decides again here."""
    namespace, cohort = joining.metadata.namespace, joining.spec.cohort
    for item in (await ctx.store.list(QUOTAS, namespace=namespace)).items:
        other = codec.decode(v1.ResourceQuota, item.value, item.mod_revision)
        if other.metadata.name != joining.metadata.name and other.spec.cohort == cohort:
            message = (
                f"namespace {namespace} already takes part in cohort {cohort} through quota {other.metadata.name} "
                "(a namespace joins a cohort through one quota: its use would count twice)"
            )
            raise Invalid.of([FieldViolation("spec.cohort", message)])


async def _marker(ctx: KindContext, cohort: str) -> Also:
    key = mark_key(cohort)
    try:
        revision = (await ctx.store.get(MARKS, key)).mod_revision
    except NotFound:
        revision = 0
    return Also(MARKS, key, b"", revision)


STRATEGY = ResourceQuotaStrategy(KIND)

__all__ = ["KIND", "POLICIES", "STRATEGY", "ResourceQuotaStrategy", "quota_spec", "quota_status"]
