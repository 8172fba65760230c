"""AdmissionPolicies in caractrl: the `get` table, the generic `describe` (metadata, spec: resources and hooks)
and the schema of a policy manifest.

NAME RESOURCES HOOKS AGE   (wide: + URLS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView, SchemaBits
from caravanserai.cli.printers import NONE, age
from caravanserai.cli.tables import Columns, RowContext

HEADERS = ("NAME", "RESOURCES", "HOOKS", "AGE")


def policy_row(policy: v1.AdmissionPolicy, ctx: RowContext, wide: bool) -> list[str]:
    """Name, the hooked resources, each hook as `name(Type)`, age (wide: + the hooks' URLs)."""
    spec = policy.spec
    row = [
        policy.metadata.name,
        ",".join(spec.resources) or NONE,
        ",".join(f"{h.name}({h.type})" for h in spec.hooks) or NONE,
        age(policy.metadata.creation_timestamp, ctx.now),
    ]
    if wide:
        row.append(",".join(h.url for h in spec.hooks) or NONE)
    return row


VIEW = KindView(
    "admissionpolicies",
    Columns(HEADERS, (*HEADERS, "URLS"), policy_row),
    deletable=True,
    schema=SchemaBits(
        top_required=("spec",),
        required={"AdmissionPolicySpec": ("resources", "hooks"), "AdmissionHook": ("name", "type", "url")},
        non_empty=frozenset({("AdmissionPolicySpec", "resources"), ("AdmissionPolicySpec", "hooks")}),
    ),
)

__all__ = ["HEADERS", "VIEW", "policy_row"]
