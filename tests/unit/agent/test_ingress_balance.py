"""The ingress balancer: which copies may answer, least connections then round robin, and when to retry."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import aiohttp
import pytest

from caravanserai import v1
from caravanserai.agent.ingress.balance import (
    Backend,
    Balancer,
    may_retry_failure,
    may_retry_page,
    serving,
    serving_node,
)
from caravanserai.agent.ingress.routes import Route

NOW = 1000.0


def route(project: str, *, node: str = "n1", phase: str = v1.RUNNING, ready: bool = True, **extra: object) -> Route:
    base = Route("web.example.com", project, "site", "web", 8080, "Public", phase, node, "c-" + project, 0.0)
    return replace(base, ready=ready, owner="set-uid", **extra)  # type: ignore[arg-type]  # fields of Route


@pytest.mark.parametrize(
    ("the_route", "node"),
    [
        (route("a"), "n1"),
        (route("a", ready=False), "n1"),  # not ready, nothing better: its node
        (route("a", phase=v1.SCHEDULED), ""),
        (route("a", phase=v1.PENDING, node="", previous_node="n1", handoff_until=NOW + 60), "n1"),  # the old copy
        (route("a", phase=v1.PENDING, node="", previous_node="n1", handoff_until=NOW - 1), ""),  # hand-off over
        (route("a", node="n2", ready=False, previous_node="n1", handoff_until=NOW + 60), "n1"),  # new not ready yet
        (route("a", node="n2", previous_node="n1", handoff_until=NOW + 60), "n2"),  # new copy ready: switched
        (route("a", phase=v1.TERMINATING, node="n2", previous_node="n1", handoff_until=NOW + 60), ""),
    ],
)
def test_serving_node(the_route: Route, node: str) -> None:
    assert serving_node(the_route, now=NOW) == node


def test_replicas_that_are_not_ready_are_skipped() -> None:
    routes = [route("a"), route("b", ready=False), route("c", node="n2"), route("d", phase=v1.PENDING, node="")]
    assert [(b.route.project, b.node) for b in serving(routes, now=NOW)] == [("a", "n1"), ("c", "n2")]
    starting = [route("a", ready=False), route("b", ready=False, node="n2")]  # none ready: every running copy
    assert [b.route.project for b in serving(starting, now=NOW)] == ["a", "b"]
    assert serving([route("a", phase=v1.SCHEDULED)], now=NOW) == []


def test_round_robin_among_equally_loaded_copies() -> None:
    backends = serving([route("a"), route("b"), route("c", node="n2")], now=NOW)
    balancer = Balancer()
    chosen = Counter(balancer.choose(backends, tried=set()).route.project for _ in range(30))  # type: ignore[union-attr]  # copies are left
    assert chosen == Counter({"a": 10, "b": 10, "c": 10})


def test_least_connections_first() -> None:
    a, b = Backend(route("a"), "n1"), Backend(route("b"), "n2")
    balancer = Balancer()
    with balancer.using(a), balancer.using(a), balancer.using(b):
        assert balancer.in_flight(a) == 2
        assert {balancer.choose([a, b], tried=set()) for _ in range(4)} == {b}
    assert balancer.in_flight(a) == balancer.in_flight(b) == 0  # released, even after an exception
    with pytest.raises(RuntimeError), balancer.using(a):
        raise RuntimeError("the request failed")
    assert balancer.in_flight(a) == 0


def test_a_copy_tried_is_not_chosen_again() -> None:
    a, b = Backend(route("a"), "n1"), Backend(route("b"), "n2")
    balancer = Balancer()
    assert balancer.choose([a, b], tried={a.key}) == b
    assert balancer.choose([a, b], tried={a.key, b.key}) is None


def _connector_error() -> aiohttp.ClientConnectorError:
    key = aiohttp.client_reqrep.ConnectionKey("10.0.0.1", 80, False, True, None, None, None)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "refused"))


@pytest.mark.parametrize(
    ("exc", "method", "retry"),
    [
        (_connector_error(), "POST", True),  # never reached the backend
        (aiohttp.ConnectionTimeoutError("connect timed out"), "POST", True),
        (aiohttp.ServerDisconnectedError(), "GET", True),  # idempotent: safe to repeat
        (aiohttp.ServerDisconnectedError(), "POST", False),  # the backend may have acted on it
        (aiohttp.ClientOSError(104, "reset"), "put", True),
        (TimeoutError(), "GET", False),  # a slow answer is not repeated elsewhere
        (aiohttp.ClientPayloadError("bad"), "GET", False),
    ],
)
def test_which_failures_are_retried(exc: Exception, method: str, retry: bool) -> None:
    assert may_retry_failure(exc, method=method) is retry


@pytest.mark.parametrize(
    ("status", "error", "method", "retry"),
    [
        (503, "not-running", "POST", True),
        (503, "no-backend", "POST", True),
        (502, "misrouted", "POST", True),
        (502, "backend-unreachable", "POST", True),
        (502, "backend-refused", "GET", True),
        (502, "backend-refused", "POST", False),
        (504, "backend-timeout", "GET", False),
        (503, "", "GET", False),  # a page of the container itself
        (413, "request-too-large", "GET", False),
    ],
)
def test_which_pages_of_another_ingress_are_retried(status: int, error: str, method: str, retry: bool) -> None:
    assert may_retry_page(status, error, method=method) is retry
