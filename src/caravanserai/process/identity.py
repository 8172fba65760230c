"""Who is calling a gRPC service: the identity behind a client certificate or a bearer token.

Shared by every server that authenticates callers (the API server, and the agent for `PortForward` and `Exec`):

* **Bearer tokens first**: an `authorization: Bearer <token>` header is looked up in the token table (from a
  token file of `token,user[,group;group]` lines); an unknown token is `Unauthenticated`, never a fallback to
  the certificate.
* **Then the client certificate**: under mutual TLS the identity is the certificate's common name.
* **Authentication off** (no client certificates required and no tokens): every caller is `LOCAL_ADMIN`, as on a
  loopback development cluster.

User names carry the role: `admin` (or group `admin`), `controller:<name>`, `node:<name>`, anything else.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from caravanserai.errors import Unauthenticated


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
    def controller(self) -> str | None:
        """`<name>` of a `controller:<name>` user, else None."""
        return self.user.removeprefix("controller:") if self.user.startswith("controller:") else None

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


__all__ = ["Authenticator", "Identity", "LOCAL_ADMIN", "load_token_file"]
