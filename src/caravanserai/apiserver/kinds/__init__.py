"""The kinds an apiserver serves: one strategy object per kind (see `base`), found through a `KindTable`.

Each built-in kind lives in this package with its rules beside its strategy: a module for a small kind
(`node`, `lease`, `event`, `secret`, `config`, `definition`, `backuprepository`,
`admissionpolicy`, `nodegroup`, `projectset`, `namespace`), a package for the Project
(`project/`: strategy, rules, service rules, data rules, backup rules). `apiserver.validation` is the generic
rule library they all call. `builtin_kinds()` is a fresh table of the built-in kinds. Custom kinds
(`custom.CustomKindStrategy`, one per ResourceDefinition) are added to a server's table at run time by
`apiserver.definitions.DefinitionServer`.

    validate_object("projects", project)   # Create and Update: type meta, metadata and spec, as the strategy does
    validate_status("projects", project)   # UpdateStatus: status
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from caravanserai.apiserver.kinds import (
    admissionpolicy,
    backuprepository,
    config,
    definition,
    event,
    lease,
    namespace,
    node,
    nodegroup,
    project,
    projectset,
    rbac,
    resourcequota,
    route,
    secret,
)
from caravanserai.apiserver.kinds.base import FINALIZE, MARK, NOOP, REMOVE, KindContext, KindStrategy, KindTable
from caravanserai.errors import FieldViolation, Invalid
from caravanserai.text.violations import quote

BUILTIN: tuple[KindStrategy[Any], ...] = (
    project.STRATEGY,
    node.STRATEGY,
    lease.STRATEGY,
    event.STRATEGY,
    definition.STRATEGY,
    secret.STRATEGY,
    config.STRATEGY,
    backuprepository.STRATEGY,
    admissionpolicy.STRATEGY,
    nodegroup.STRATEGY,
    projectset.STRATEGY,
    namespace.STRATEGY,
    *rbac.STRATEGIES,
    resourcequota.STRATEGY,
    route.STRATEGY,
)


def builtin_kinds() -> KindTable:
    """A new table holding the built-in kinds."""
    return KindTable(list(BUILTIN))


def _builtin(resource: str, obj: Message) -> KindStrategy[Any]:
    strategy = next((s for s in BUILTIN if s.plural == resource), None)
    if strategy is None:
        known = ", ".join(sorted(s.plural for s in BUILTIN))
        raise Invalid.of([FieldViolation("resource", f"unknown resource {quote(resource)}; known: {known}")])
    if not isinstance(obj, strategy.kind.cls):
        raise TypeError(f"{resource} holds {strategy.kind.cls.__name__} objects, not {type(obj).__name__}")
    return strategy


def validate_object(resource: str, obj: Message) -> None:
    """Check type meta, metadata and spec of a built-in kind's object for Create or Update, as its strategy does.

    `resource` is the plural ("projects", "nodes" …). Raises `Invalid` listing every violation.
    """
    _builtin(resource, obj).validate(obj)


def validate_status(resource: str, obj: Message) -> None:
    """Check the status of a built-in kind's object for UpdateStatus, as its strategy does (metadata and spec are
    not looked at). Raises `Invalid` listing every violation."""
    _builtin(resource, obj).validate_status(obj)


__all__ = [
    "BUILTIN",
    "FINALIZE",
    "KindContext",
    "KindStrategy",
    "KindTable",
    "MARK",
    "NOOP",
    "REMOVE",
    "builtin_kinds",
    "validate_object",
    "validate_status",
]
