"""The agent's ingress: the proxy on `--ingress-listen`, its route table, and the informers that feed it.

    ingress = Ingress(runtime, node="node-1", listen="0.0.0.0:8081", limits=IngressLimits())
    async with ingress.serving():
        ingress.follow(factory)      # informers of every Route and every Node, shared with the agent
        ...

Guarantees: `serving()` listens before it returns (the port is in `ingress.port` for the Node status, 0 when
the listen address is `off`); routes follow the informers' changes as they are delivered (no polling), so a
project that becomes Running, moves or is deleted is routed accordingly as soon as the routes controller has
written its Route (`caravanserai.project.routing`) and the watch event arrives. The agent of this release needs
the Routes: the controller-manager that derives them is upgraded with or before the agents.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import ipaddress
from collections.abc import AsyncIterator, Callable

from caravanserai import v1
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.ingress.endpoints import ContainerBackends, ServiceEndpoints
from caravanserai.agent.ingress.hop import HopAuth
from caravanserai.agent.ingress.httpdetails import IngressLimits, IPNetwork
from caravanserai.agent.ingress.proxy import IngressProxy
from caravanserai.agent.ingress.routes import RouteTable
from caravanserai.informer import SharedInformerFactory
from caravanserai.process.helpformat import flag_type
from caravanserai.text import addresses
from caravanserai.text.addresses import Address
from caravanserai.text.durations import parse_duration
from caravanserai.text.quantity import to_int

DEFAULT_INGRESS_LISTEN = "0.0.0.0:8081"


def parse_listen(listen: str, *, flag: str = "--ingress-listen") -> Address | None:
    """(host, port) of an `--ingress-listen` value (`:8081`: every interface), None for `off`; ValueError names
    `flag` and what is wrong."""
    return addresses.parse_listen(listen, flag=flag, default_host="0.0.0.0")


def _seconds(text: str) -> float:
    """A positive duration (`5s`, `1m30s`)."""
    value = parse_duration(text)
    if value <= 0:
        raise ValueError(f"must be positive, not {text}")
    return value


def add_ingress_arguments(parser: argparse.ArgumentParser) -> None:
    """The `--ingress-*` flags of cara-agent."""
    d = IngressLimits()
    add = parser.add_argument
    add(
        "--ingress-listen",
        type=flag_type(functools.partial(parse_listen, flag=""), keep_text=True),  # argparse names the flag
        default=DEFAULT_INGRESS_LISTEN,
        help=f"HOST:PORT of the ingress HTTP proxy, or off (default {DEFAULT_INGRESS_LISTEN})",
    )
    _add_body_limits(add, d)
    _add_timeouts(add, d)
    _add_client_limits(add, d)


def _add_body_limits(add: Callable[..., object], d: IngressLimits) -> None:
    add(
        "--ingress-max-request-body",
        type=flag_type(to_int),
        default=d.max_request_body,
        metavar="SIZE",
        help="largest request body the ingress forwards, e.g. 64Mi; 0: no limit (default 64Mi)",
    )
    add(
        "--ingress-max-response-body",
        type=flag_type(to_int),
        default=d.max_response_body,
        metavar="SIZE",
        help="largest response body the ingress relays before cutting it off; 0: no limit (default 0)",
    )


def _add_timeouts(add: Callable[..., object], d: IngressLimits) -> None:
    add(
        "--ingress-connect-timeout",
        type=flag_type(_seconds),
        default=d.connect_timeout,
        metavar="DURATION",
        help="time to connect to another node's ingress (default 5s)",
    )
    add(
        "--ingress-local-connect-timeout",
        type=flag_type(_seconds),
        default=d.local_connect_timeout,
        metavar="DURATION",
        help="time to connect to a container on this node; a container that is restarting does not answer, and the "
        "request fails fast with 503 (default 500ms)",
    )
    add(
        "--ingress-response-timeout",
        type=flag_type(_seconds),
        default=d.response_timeout,
        metavar="DURATION",
        help="time for a backend to send its response headers (default 60s)",
    )
    add(
        "--ingress-idle-timeout",
        type=flag_type(_seconds),
        default=d.idle_timeout,
        metavar="DURATION",
        help="time without a byte from the backend before the exchange ends (default 5m)",
    )


def parse_networks(text: str) -> tuple[IPNetwork, ...]:
    """`10.0.0.0/8,192.0.2.7` as networks (an address alone is its own /32 or /128); "" is none."""
    networks = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{part!r} is not an address or CIDR network (e.g. 10.0.0.0/8)") from None
    return tuple(networks)


def _add_client_limits(add: Callable[..., object], d: IngressLimits) -> None:
    add(
        "--ingress-header-timeout",
        type=flag_type(_seconds),
        default=d.header_timeout,
        metavar="DURATION",
        help="time for a client to send a request's head, from its first byte; then the connection is closed "
        "(default 10s)",
    )
    add(
        "--ingress-body-timeout",
        type=flag_type(_seconds),
        default=d.body_timeout,
        metavar="DURATION",
        help="time without a byte of a request body being read before the request ends with 408 (default 1m)",
    )
    add(
        "--ingress-keepalive-timeout",
        type=flag_type(_seconds),
        default=d.keepalive_timeout,
        metavar="DURATION",
        help="time an idle client connection is kept open, waiting for a request (default 30s)",
    )
    add(
        "--ingress-max-connections",
        type=flag_type(_count),
        default=d.max_connections,
        metavar="N",
        help="client connections open at once; more are answered 503 and closed (default 4096)",
    )
    add(
        "--ingress-max-connections-per-client",
        type=flag_type(_count),
        default=d.max_connections_per_client,
        metavar="N",
        help="client connections open at once from one address; nodes and trusted proxies count only against "
        "--ingress-max-connections (default 256)",
    )
    add(
        "--trusted-proxies",
        type=flag_type(parse_networks),
        default=d.trusted_proxies,
        metavar="CIDR,...",
        help="proxies in front of the ingress whose X-Forwarded-* and Forwarded headers are kept; from anyone "
        "else they are dropped and set anew (default: none)",
    )


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"must be a whole number, not {text!r}") from None
    if value < 1:
        raise ValueError(f"must be at least 1, not {text}")
    return value


def limits_from_args(args: argparse.Namespace) -> IngressLimits:
    return IngressLimits(
        max_request_body=args.ingress_max_request_body,
        max_response_body=args.ingress_max_response_body,
        connect_timeout=args.ingress_connect_timeout,
        local_connect_timeout=args.ingress_local_connect_timeout,
        response_timeout=args.ingress_response_timeout,
        idle_timeout=args.ingress_idle_timeout,
        header_timeout=args.ingress_header_timeout,
        body_timeout=args.ingress_body_timeout,
        keepalive_timeout=args.ingress_keepalive_timeout,
        max_connections=args.ingress_max_connections,
        max_connections_per_client=args.ingress_max_connections_per_client,
        trusted_proxies=args.trusted_proxies,
    )


class Ingress:
    """One node's ingress proxy and route table."""

    def __init__(
        self, runtime: DockerRuntime, *, node: str, listen: str, limits: IngressLimits, hops: HopAuth | None = None
    ) -> None:
        self.address = parse_listen(listen)
        self.table = RouteTable()
        self.backends = ContainerBackends(ServiceEndpoints(runtime, node=node))
        self.proxy = IngressProxy(self.table, self.backends, node=node, limits=limits, hops=hops)

    @property
    def port(self) -> int:
        return self.proxy.port

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Ingress]:
        """Serve until the block ends (nothing at all when the ingress is off)."""
        if self.address is None:
            yield self
            return
        async with self.proxy.serving(*self.address):
            yield self

    def switched(self, project: str, service: str) -> None:
        """A service's container on this node was replaced (a start-first update): requests go to the new one."""
        self.backends.forget_service(project, service)

    def follow(self, informers: SharedInformerFactory) -> None:
        """Route from the shared informers of every Route and every Node (never another node's projects)."""
        if self.address is not None:
            self.table.follow(informers.informer(v1.Route), informers.informer(v1.Node))


__all__ = [
    "DEFAULT_INGRESS_LISTEN",
    "Ingress",
    "add_ingress_arguments",
    "limits_from_args",
    "parse_listen",
    "parse_networks",
]
