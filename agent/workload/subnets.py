"""The agent's own address space for project networks: small subnets (by default /28s) carved out of one configured
range (by default `DEFAULT_RANGE`, a private /16), given explicitly to each network the agent makes.

Without it every bridge network takes one of Docker's default address pools (about 30 ranges of /16 or /20 on a
stock engine), so a warm pool of spare networks sized to a burst of projects would hold most of them. With it a
pool of 64 spare networks costs 64 × 16 addresses of a range nobody else uses.

Guarantees:

* **Never an overlap with what the host already has.** A subnet is chosen only when it overlaps no route of the
  host (`host_routes`: every IPv4 route but the default one, read just before) and no subnet of any network Docker
  knows (every network, ours or not, read just before); Docker itself refuses only overlaps with its own networks,
  not with routes.
* **Agents sharing one engine never collide.** Each starts its search at a place derived from its node name, so
  two agents mostly pick far apart; when two pick the same subnet at the same moment Docker refuses the second
  ("Pool overlaps"), which then takes the next free one (`ATTEMPTS` at most). Within one process a subnet being
  created is held back from every other creation until Docker lists it.
* **Reuse.** Nothing is stored: a network removed frees its subnet, the next search finds it free.
* **Exhaustion is an error that names the range** (`AddressSpaceExhausted`, a `DockerRefused`): the pool's upkeep
  retries it with backoff, a project waiting for its network reports it.
* **Big projects fit.** A project with more services than a subnet of `prefix` holds gets a larger aligned subnet
  of the range (`AddressSpace.prefix_for`).
"""

from __future__ import annotations

import bisect
import hashlib
import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

import structlog

from caravanserai.agent.docker.calls import DockerRefused
from caravanserai.agent.docker.engine import DockerRuntime

log = structlog.get_logger(__name__)

DEFAULT_RANGE = "10.188.0.0/16"
"""`--network-range`: a private /16 that Docker's default address pools (172.17–31.0.0/16, 192.168.0.0/16) never
use; ranges already routed on the host are skipped subnet by subnet."""
DEFAULT_PREFIX = 28
"""`--network-prefix`: /28 subnets, 13 containers each besides the gateway (a bigger project gets a bigger one)."""
MAX_PREFIX = 29  # the smallest subnet that still holds a gateway and some containers
ATTEMPTS = 8  # subnets tried in a row when Docker refuses each as overlapping (another agent took it meanwhile)
RESERVED_ADDRESSES = 3  # network address, broadcast address, gateway


@dataclass(frozen=True, slots=True)
class AddressSpace:
    """Where project networks take their subnets from: `range`, cut into aligned subnets of `prefix` bits."""

    range: IPv4Network
    prefix: int = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not self.range.prefixlen <= self.prefix <= MAX_PREFIX:
            raise ValueError(
                f"network prefix /{self.prefix} must lie between the range's /{self.range.prefixlen} and /{MAX_PREFIX}"
            )

    @classmethod
    def parse(cls, text: str, prefix: int = DEFAULT_PREFIX) -> AddressSpace:
        """`10.188.0.0/16` → the space; ValueError naming the problem for anything but an IPv4 network address."""
        try:
            network = ipaddress.ip_network(text.strip(), strict=True)
        except ValueError as exc:
            raise ValueError(f"network range {text!r} is not an IPv4 network (e.g. {DEFAULT_RANGE}): {exc}") from None
        if not isinstance(network, IPv4Network):
            raise ValueError(f"network range {text!r} must be IPv4")
        return cls(network, prefix)

    @property
    def containers_per_subnet(self) -> int:
        """How many containers a subnet of `prefix` holds (besides network, broadcast and gateway addresses)."""
        return capacity(self.prefix)

    def prefix_for(self, containers: int) -> int | None:
        """The prefix of the subnets given to a network for `containers`: `prefix`, or a larger subnet when they do
        not fit; None when not even the whole range holds them."""
        prefix = self.prefix
        while capacity(prefix) < containers:
            prefix -= 1
            if prefix < self.range.prefixlen:
                return None
        return prefix


def capacity(prefix: int) -> int:
    """Containers a /`prefix` subnet holds."""
    return int(2 ** (32 - prefix)) - RESERVED_ADDRESSES


def first_free(
    space_range: IPv4Network, prefix: int, taken: Iterable[IPv4Network], *, start: int = 0
) -> IPv4Network | None:
    """The first aligned /`prefix` subnet of `space_range` that overlaps none of `taken`, searching from the
    `start`-th subnet of the range (modulo their number) to its end, then from its beginning; None when none is
    free. Cost: O(t log t) for t taken subnets, whatever the size of the range."""
    size = 2 ** (32 - prefix)
    low, high = int(space_range.network_address), int(space_range.broadcast_address) + 1
    busy = _merged((int(n.network_address), int(n.broadcast_address) + 1) for n in taken)
    count = (high - low) // size
    first = low + (start % count) * size
    found = _scan(busy, first, high, size)
    if found is None:
        found = _scan(busy, low, first, size)
    return None if found is None else IPv4Network((found, prefix))


def _merged(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open [start, end) intervals, sorted and merged."""
    out: list[tuple[int, int]] = []
    for begin, end in sorted(intervals):
        if out and begin <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out


def _scan(busy: list[tuple[int, int]], begin: int, end: int, size: int) -> int | None:
    """The first address in [begin, end), aligned to `size` (as `begin` is), whose block of `size` addresses
    overlaps no interval of `busy` (sorted, merged) and ends by `end`."""
    at = begin
    starts = [b for b, _ in busy]
    while at + size <= end:
        i = bisect.bisect_right(starts, at + size - 1) - 1  # the last interval starting inside or before the block
        if i < 0 or busy[i][1] <= at:
            return at
        at = busy[i][1] + (-(busy[i][1] - begin)) % size  # the next aligned block after that interval
    return None


def host_routes(path: str = "/proc/net/route") -> list[IPv4Network]:
    """The IPv4 destinations the host routes (any table entry in `path`, reject routes too), but the default route."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    routes = []
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        destination, mask = _le_address(fields[1]), _le_address(fields[7])
        if mask == 0:
            continue
        routes.append(IPv4Network((destination & mask, bin(mask).count("1"))))
    return routes


def _le_address(hex_text: str) -> int:
    """An address as /proc/net/route writes it (hexadecimal, little-endian) → its integer."""
    return int.from_bytes(int(hex_text, 16).to_bytes(4, "little"), "big")


class AddressSpaceExhausted(DockerRefused):
    """No subnet of the space is free; names the range and the flag that sets it."""


class SubnetAllocator:
    """Makes networks with a free subnet of `space` each (see the module docstring). Shared by every network the
    agent makes; calls may overlap."""

    def __init__(
        self,
        docker: DockerRuntime,
        space: AddressSpace,
        *,
        node: str,
        routes: Callable[[], list[IPv4Network]] = host_routes,
    ) -> None:
        self.docker = docker
        self.space = space
        self._routes = routes
        self._start = int.from_bytes(hashlib.sha256(node.encode()).digest()[:4], "big")
        self._creating: set[IPv4Network] = set()  # subnets this process is making networks with right now
        self._refused: set[IPv4Network] = set()  # subnets Docker refused as overlapping since the last success

    async def ensure(self, config: Mapping[str, Any], *, containers: int = 0) -> None:
        """Create the bridge network `config` describes (name, labels …) with a free subnet big enough for
        `containers`, unless a network of that name exists. Raises AddressSpaceExhausted, or DockerError."""
        if await self.docker.network_present(config["Name"]):
            return
        prefix = self.space.prefix_for(containers)
        if prefix is None:
            raise AddressSpaceExhausted(
                403, f"network range {self.space.range} cannot hold {containers} containers (--network-range)"
            )
        for _ in range(ATTEMPTS):
            subnet = await self._choose(prefix)
            self._creating.add(subnet)
            try:
                await self.docker.ensure_network({**config, "IPAM": ipam(subnet)})
            except DockerRefused as exc:
                if "overlaps" not in exc.message.lower():
                    raise
                log.info("subnet taken meanwhile; trying another", subnet=str(subnet), network=config["Name"])
                self._refused.add(subnet)
                continue
            finally:
                self._creating.discard(subnet)
            self._refused.clear()  # Docker lists those by now
            return
        raise DockerRefused(403, f"create network {config['Name']}: {ATTEMPTS} subnets in a row were taken meanwhile")

    async def _choose(self, prefix: int) -> IPv4Network:
        listed = await self.docker.list_networks([])
        taken = [*self._routes(), *self._creating, *self._refused]
        for network in listed:
            taken.extend(_subnets(network.subnets))
        subnet = first_free(self.space.range, prefix, taken, start=self._start)
        if subnet is None:
            raise AddressSpaceExhausted(
                403, f"no free /{prefix} left in network range {self.space.range} (--network-range, --network-prefix)"
            )
        return subnet


def allocator(docker: DockerRuntime, network_range: str, prefix: int, *, node: str) -> SubnetAllocator | None:
    """The allocator of `node`'s project network subnets from `network_range` (None for "": Docker chooses)."""
    if not network_range:
        return None
    return SubnetAllocator(docker, AddressSpace.parse(network_range, prefix), node=node)


def ipam(subnet: IPv4Network) -> dict[str, Any]:
    """Docker's IPAM configuration for a bridge network on `subnet`, its first address the gateway."""
    return {"Driver": "default", "Config": [{"Subnet": str(subnet), "Gateway": str(subnet.network_address + 1)}]}


def _subnets(texts: Iterable[str]) -> list[IPv4Network]:
    """The IPv4 subnets among Docker's IPAM subnet strings (IPv6 ones and malformed ones are skipped)."""
    out = []
    for text in texts:
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            continue
        if isinstance(network, IPv4Network):
            out.append(network)
    return out


__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_RANGE",
    "AddressSpace",
    "AddressSpaceExhausted",
    "SubnetAllocator",
    "allocator",
    "capacity",
    "first_free",
    "host_routes",
    "ipam",
]
