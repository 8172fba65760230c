"""Which copy of a project answers a request: the ingress balancer and its retry policy.

    backends = serving(table.replicas(host), now=clock.now())
    backend = balancer.choose(backends, tried=set())
    with balancer.using(backend):
        ...                                    # send the request to backend.node

A host is served by a group of routes (`routes.RouteTable.replicas`): one route for a single project, one per
replica for projects of one owner. Guarantees:

* **Where a copy runs** (`serving_node`): a Running route is served by its node once its target service is ready;
  while the project is handed over (`previous_node` until `handoff_until`: a drain, a taint) and the new copy is
  not Running and ready yet, by the node it leaves, whose agent keeps the old containers until then. A Running
  route that is not ready and not handed over is still served by its node (a single project has no better copy).
* **Ready copies first** (`serving`): when any copy is ready (or an old copy still serves during its hand-off),
  only those are chosen; replicas that are not ready are skipped. When none is, every Running copy may be tried.
* **Least connections, then round robin** (`Balancer.choose`): the copy with the fewest requests in flight from
  this ingress (`using` counts them); among equals, turns go round. A copy already tried for the request is not
  chosen again.
* **Retries never repeat a request a backend may have acted on** (`may_retry_failure`, `may_retry_page`): a
  request goes to another copy only when no byte of its body was sent yet and no byte of a response went to the
  client, and either the first copy never got it (a refused or timed-out connect, no container, the next ingress
  answered that it reached none) or its method is idempotent (RFC 9110 §9.2.2) and the connection broke before
  the response began. At most `MAX_ATTEMPTS` copies are tried.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import aiohttp

from caravanserai import v1
from caravanserai.agent.ingress.routes import Route

MAX_ATTEMPTS = 3
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
UNREACHED = frozenset({"not-running", "no-backend", "misrouted", "node-unreachable", "backend-unreachable"})
"""Error words of an ingress page saying that the request reached no container (safe to send elsewhere)."""
REFUSED = "backend-refused"
"""The error word of a page saying the container broke the connection (retried for idempotent methods only)."""
_LEAVING = (v1.TERMINATING, v1.TERMINATED)


@dataclass(frozen=True, slots=True)
class Backend:
    """A copy of a project that may answer: `route`, served by the containers on `node`."""

    route: Route
    node: str

    @property
    def key(self) -> tuple[str, str]:
        return self.route.project, self.node

    @property
    def ready(self) -> bool:
        """Ready, or the old copy of a project handed over (it served until the move)."""
        return self.route.ready or self.node != self.route.node


def serving_node(route: Route, *, now: float) -> str:
    """The node whose containers serve `route` now ("" when none does; see the module docstring)."""
    handed_over = bool(route.previous_node) and route.handoff_until > now and route.phase not in _LEAVING
    if route.running and (route.ready or not handed_over):
        return route.node
    return route.previous_node if handed_over else ""


def serving(routes: Sequence[Route], *, now: float) -> list[Backend]:
    """The copies that may answer for a host served by `routes`: the ready ones, else every one that runs."""
    live = [Backend(r, node) for r in routes if (node := serving_node(r, now=now))]
    return [b for b in live if b.ready] or live


class Balancer:
    """Least connections with round robin among equals, over the copies of every host of one ingress."""

    def __init__(self) -> None:
        self._in_flight: Counter[tuple[str, str]] = Counter()  # backend key → requests being served through it
        self._turns = itertools.count()  # the round-robin turn: one step per choice

    def choose(self, backends: Sequence[Backend], *, tried: set[tuple[str, str]]) -> Backend | None:
        """The copy to try next, None when every copy was tried."""
        left = [b for b in backends if b.key not in tried]
        if not left:
            return None
        fewest = min(self._in_flight[b.key] for b in left)
        equal = [b for b in left if self._in_flight[b.key] == fewest]
        return equal[next(self._turns) % len(equal)]

    def in_flight(self, backend: Backend) -> int:
        return self._in_flight[backend.key]

    @contextlib.contextmanager
    def using(self, backend: Backend) -> Iterator[None]:
        """Count a request in flight to `backend` for as long as the block runs."""
        self._in_flight[backend.key] += 1
        try:
            yield
        finally:
            self._in_flight[backend.key] -= 1
            if self._in_flight[backend.key] <= 0:
                del self._in_flight[backend.key]


def never_sent(exc: BaseException) -> bool:
    """Whether `exc` means that the request never reached the backend (the connection was not made)."""
    return isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError)


def may_retry_failure(exc: BaseException, *, method: str) -> bool:
    """Whether a request whose body was not sent may go to another copy after `exc` (before any response)."""
    if never_sent(exc):
        return True
    broken = isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)
    return broken and method.upper() in IDEMPOTENT


def may_retry_page(status: int, error: str, *, method: str) -> bool:
    """Whether another node's ingress page (`status`, its `X-Caravanserai-Error` word) lets the request whose body
    was not sent go to another copy."""
    if status not in (502, 503):
        return False
    return error in UNREACHED or (error == REFUSED and method.upper() in IDEMPOTENT)


__all__ = [
    "Backend",
    "Balancer",
    "IDEMPOTENT",
    "MAX_ATTEMPTS",
    "REFUSED",
    "UNREACHED",
    "may_retry_failure",
    "may_retry_page",
    "never_sent",
    "serving",
    "serving_node",
]
