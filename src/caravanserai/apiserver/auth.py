"""Who is calling (authentication) and whether they may (authorization).

Identity comes from the client certificate's common name under mutual TLS, or from a bearer token listed in the
token file (`token,user[,group;group]` per line). User names carry the role:

| identity            | may                                                                                  |
|---------------------|--------------------------------------------------------------------------------------|
| `admin`, group admin| everything                                                                           |
| `controller:<name>` | read everything; write project status, node status, leases, events; delete projects  |
| `node:<name>`       | read every project and node (its ingress routes any host to the node that runs it);   |
|                     | write its own Node and Lease and the status of projects bound to it; create events,  |
|                     | update its own events                                                                |
| anyone else         | read-only: get, list, watch                                                          |

Custom kinds: only `admin` writes ResourceDefinitions; `controller:*` identities also write objects of custom
kinds and their status; `node:*` identities may use only the verbs a definition lists in `nodeVerbs`. The
per-kind rules live in each kind's strategy (`controller_writes`, `node_allows`).

With authentication off (no TLS client CA and no token file: a loopback development cluster) every caller is
`admin`. Every denial is PERMISSION_DENIED and logged.
"""

from __future__ import annotations

from typing import Any

import structlog

from caravanserai.apiserver.kinds import KindTable
from caravanserai.errors import Forbidden
from caravanserai.identity import LOCAL_ADMIN, Authenticator, Identity, load_token_file

log = structlog.get_logger(__name__)

READ_VERBS = frozenset({"get", "list", "watch"})


class Authorizer:
    """The table above, as code: the role rules here, the per-kind rules in each kind's strategy
    (`controller_writes`, `node_allows`). `check` raises Forbidden (and logs) or returns."""

    def __init__(self, kinds: KindTable) -> None:
        self._kinds = kinds

    def check(
        self,
        who: Identity,
        verb: str,
        resource: str,
        *,
        name: str = "",
        obj: Any = None,
        old: Any = None,
        field_selector: str = "",
    ) -> None:
        if self._allowed(who, verb, resource, name=name, obj=obj, old=old, field_selector=field_selector):
            return
        target = f"{resource}/{name}" if name else resource
        log.warning("permission denied", user=who.user, verb=verb, target=target)
        raise Forbidden(f"{who.user} may not {verb} {target}")

    def _allowed(self, who: Identity, verb: str, resource: str, **ctx: Any) -> bool:
        if who.is_admin:
            return True
        strategy = self._kinds.get(resource)
        if who.node is not None:
            return strategy is not None and strategy.node_allows(who.node, verb, **ctx)
        if who.is_controller:
            return verb in READ_VERBS or (strategy is not None and verb in strategy.controller_writes)
        return verb in READ_VERBS


__all__ = ["Authenticator", "Authorizer", "Identity", "LOCAL_ADMIN", "load_token_file"]
