"""Who is calling (authentication) and whether they may (authorization).

Identity comes from the client certificate's common name under mutual TLS, or from a bearer token listed in the
token file (`token,user[,group;group]` per line). User names carry the role:

| identity            | may                                                                                  |
|---------------------|--------------------------------------------------------------------------------------|
| `admin`, group admin| everything                                                                           |
| `controller:<name>` | read everything; write project status, node status, leases, events; delete projects  |
| `node:<name>`       | its own Node and Lease; list/watch only projects with `status.nodeRef=<name>`; read and |
|                     | (read only) projects moved away from it (`status.previousNodeRef=<name>`);              |
|                     | update the status of projects bound to it; create events, update its own events      |
| anyone else         | read-only: get, list, watch                                                          |

With authentication off (no TLS client CA and no token file: a loopback development cluster) every caller is
`admin`. Every denial is PERMISSION_DENIED and logged.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import structlog

from caravanserai.apiserver.kinds import KindTable
from caravanserai.errors import Forbidden, Unauthenticated

log = structlog.get_logger(__name__)

READ_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated caller."""

    user: str
    groups: frozenset[str] = field(default_factory=frozenset)

    @property
    def node(self) -> str | None:
        return self.user.removeprefix("node:") if self.user.startswith("node:") else None

    @property
    def is_admin(self) -> bool:
        return self.user == "admin" or "admin" in self.groups

    @property
    def is_controller(self) -> bool:
        return self.user.startswith("controller:") or "controllers" in self.groups


LOCAL_ADMIN = Identity("admin", frozenset({"admin"}))


def load_token_file(path: str) -> dict[str, Identity]:
    """Tokens from a CSV file of `token,user[,group;group]` lines (# comments allowed)."""
    tokens: dict[str, Identity] = {}
    with open(Path(path).expanduser(), newline="") as f:
        for row in csv.reader(line for line in f if line.strip() and not line.startswith("#")):
            if len(row) < 2 or not row[0].strip() or not row[1].strip():
                raise ValueError(f"{path}: each line must be token,user[,groups]")
            groups = frozenset(g.strip() for g in row[2].split(";") if g.strip()) if len(row) > 2 else frozenset()
            tokens[row[0].strip()] = Identity(row[1].strip(), groups)
    return tokens


class Authenticator:
    """Identifies the caller of a gRPC call."""

    def __init__(self, *, client_certs: bool, tokens: Mapping[str, Identity] | None = None) -> None:
        self._client_certs = client_certs
        self._tokens = dict(tokens or {})

    @property
    def enabled(self) -> bool:
        return self._client_certs or bool(self._tokens)

    def identify(self, context: grpc.aio.ServicerContext[Any, Any]) -> Identity:
        if not self.enabled:
            return LOCAL_ADMIN
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
                identity = self._tokens.get(value[len("Bearer ") :].strip())
                if identity is None:
                    raise Unauthenticated("invalid bearer token")
                return identity
        if self._client_certs:
            name = next(iter(context.auth_context().get("x509_common_name") or ()), None)
            if name is not None:
                return Identity(name.decode())
        raise Unauthenticated("no client certificate or bearer token")


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
