"""The kinds an apiserver serves: one strategy object per kind (see `base`), found through a `KindTable`.

Built-in kinds live in this package, one module each; `builtin_kinds()` is a fresh table of them. Custom kinds
(`custom.CustomKindStrategy`, one per ResourceDefinition) are added to a server's table at run time by
`apiserver.definitions.DefinitionServer`.
"""

from __future__ import annotations

from caravanserai.apiserver.kinds import config, definition, event, lease, node, project, secret
from caravanserai.apiserver.kinds.base import FINALIZE, MARK, NOOP, REMOVE, KindContext, KindStrategy, KindTable

BUILTIN: tuple[KindStrategy, ...] = (
    project.STRATEGY,
    node.STRATEGY,
    lease.STRATEGY,
    event.STRATEGY,
    definition.STRATEGY,
    secret.STRATEGY,
    config.STRATEGY,
)


def builtin_kinds() -> KindTable:
    """A new table holding the built-in kinds."""
    return KindTable(list(BUILTIN))


__all__ = ["BUILTIN", "FINALIZE", "KindContext", "KindStrategy", "KindTable", "MARK", "NOOP", "REMOVE", "builtin_kinds"]
