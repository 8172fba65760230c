"""Hosts made of network namespaces on one bridge, links that can be cut, and nothing that leaks off the machine.

    network = Network.create(run_id)         # bridge cfl<run>br with 10.213.N.1/24, unreachable route first
    host = network.add_host("w0")            # namespace cfl<run>-w0, address 10.213.N.10 on its eth0
    network.cut(host); network.heal(host)    # the host's link goes down/up at the namespace end
    network.destroy()                        # namespaces, links, iptables rule, then the unreachable route

Guarantees:

* **Contained.** Before the bridge exists, an `unreachable` route for the whole subnet is added to the root
  namespace with a low priority (metric 4000); the bridge's connected route (metric 0) wins while the bridge is
  up. If the bridge or a link goes away, traffic to a harness address hits the unreachable route instead of the
  default route. It is removed last. `routes_contained()` checks with `ip route get` that every harness address
  routes via the bridge or nowhere. Namespaces have no default route, so nothing inside them reaches out either.
* **Partitions are real.** `cut` sets the host's `eth0` down inside its namespace (never the root end, so the
  root namespace keeps its routes); processes in the namespace keep running and see their connections fail.
* **Bridged traffic passes.** Docker's `FORWARD DROP` policy would drop bridged frames when br_netfilter is
  loaded; one ACCEPT rule for the bridge, tagged with a comment naming the run, is inserted and removed.
* **Nothing stays.** Every name carries the run's prefix (`cfl<run>`); `leftover_runs()` finds runs whose owner
  process is gone (a killed test run), so `support.fleet.cleanup` can remove them.

Requires root (CAP_NET_ADMIN) and the `ip` and `iptables` commands; `NamespacesUnavailable` says why not.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

PREFIX = "cfl"
"""Every namespace, link, bridge and iptables comment the harness makes starts with this."""

SUBNET_RANGE = "10.213.0.0/16"
"""The /24 subnets of harness runs are taken from this range (one not routed yet)."""

UNREACHABLE_METRIC = 4000
HOST_OFFSET = 10  # the first host gets .10; the bridge (root namespace) is .1


class NamespacesUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no `ip`/`iptables`)."""


def sh(*argv: str, check: bool = True, netns: str | None = None) -> str:
    """Run a command (inside `netns` with `ip -n`-style nsenter when given); its stdout. Raises with stderr."""
    if netns is not None:
        argv = ("nsenter", f"--net=/run/netns/{netns}", "--", *argv)
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def check_available() -> None:
    """Raise `NamespacesUnavailable` with the reason when the harness cannot run on this machine."""
    if os.geteuid() != 0:
        raise NamespacesUnavailable("the fleet harness needs root (network namespaces, bridges, iptables)")
    for tool in ("ip", "iptables", "nsenter"):
        if shutil.which(tool) is None:
            raise NamespacesUnavailable(f"the fleet harness needs the {tool!r} command (iproute2/iptables/util-linux)")
    probe = f"{PREFIX}probe{os.getpid()}"
    try:
        sh("ip", "netns", "add", probe)
    except RuntimeError as exc:
        raise NamespacesUnavailable(f"cannot create a network namespace: {exc}") from None
    sh("ip", "netns", "del", probe, check=False)


def free_subnet(run_id: str) -> ipaddress.IPv4Network:
    """A /24 of `SUBNET_RANGE` that no route of the root namespace touches (searched from a point set by run_id)."""
    routes = sh("ip", "-4", "route", "show", "table", "all")
    used = [ipaddress.ip_network(m, strict=False) for m in re.findall(r"(\d+\.\d+\.\d+\.\d+(?:/\d+)?)", routes)]
    subnets = list(ipaddress.IPv4Network(SUBNET_RANGE).subnets(new_prefix=24))
    start = int(run_id, 16) % len(subnets)
    for index in range(len(subnets)):
        candidate = subnets[(start + index) % len(subnets)]
        if candidate.network_address.packed[2] in (0, 255):
            continue
        if not any(candidate.overlaps(net) for net in used if net.prefixlen > 0):
            return candidate
    raise RuntimeError(f"no free /24 in {SUBNET_RANGE}")


@dataclass(frozen=True, slots=True)
class Host:
    """One namespace: `netns` is its name under /run/netns, `address` its IP on the bridge."""

    name: str
    netns: str
    address: str
    link: str  # the root end of its veth pair (inside, the link is called eth0)

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"


@dataclass
class Network:
    """The bridge, its subnet and the hosts on it; see the module docstring."""

    run_id: str
    subnet: ipaddress.IPv4Network
    hosts: dict[str, Host] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return f"{PREFIX}{self.run_id}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def gateway(self) -> str:
        """The bridge's address in the root namespace (where the test process talks from)."""
        return str(self.subnet.network_address + 1)

    @classmethod
    def create(cls, run_id: str, subnet: ipaddress.IPv4Network | None = None) -> Network:
        """The unreachable route, then the bridge with the first address of `subnet` (default: a free one), then
        the FORWARD rule."""
        network = cls(run_id, subnet or free_subnet(run_id))
        net = str(network.subnet)
        sh("ip", "route", "add", "unreachable", net, "metric", str(UNREACHABLE_METRIC))
        try:
            sh("ip", "link", "add", network.bridge, "type", "bridge")
            sh("ip", "addr", "add", f"{network.gateway}/{network.subnet.prefixlen}", "dev", network.bridge)
            sh("ip", "link", "set", network.bridge, "up")
            sh("iptables", "-I", "FORWARD", "1", *network._forward_rule())
        except BaseException:
            network.destroy()
            raise
        return network

    def _forward_rule(self) -> tuple[str, ...]:
        return ("-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT", "-m", "comment", "--comment", self.prefix)

    def add_host(self, name: str) -> Host:
        """A new namespace with loopback up and `eth0` on the bridge, addressed in the subnet."""
        index = len(self.hosts)
        host = Host(
            name=name,
            netns=f"{self.prefix}-{name}",
            address=str(self.subnet.network_address + HOST_OFFSET + index),
            link=f"{self.prefix}h{index}",
        )
        self.hosts[name] = host
        sh("ip", "netns", "add", host.netns)
        sh("ip", "link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        sh("ip", "link", "set", host.link, "master", self.bridge, "up")
        sh("ip", "-n", host.netns, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
        sh("ip", "-n", host.netns, "link", "set", "eth0", "up")
        sh("ip", "-n", host.netns, "link", "set", "lo", "up")
        return host

    def cut(self, host: Host) -> None:
        """Partition `host`: its eth0 goes down inside its namespace. Its processes keep running."""
        sh("ip", "-n", host.netns, "link", "set", "eth0", "down")

    def heal(self, host: Host) -> None:
        """Bring the host's eth0 up again, with its address and the subnet route."""
        sh("ip", "-n", host.netns, "link", "set", "eth0", "up")

    def routes_contained(self) -> dict[str, str]:
        """`ip route get` of the bridge address's neighbours and every host address whose route is NOT via the
        bridge or unreachable (empty = contained)."""
        escaped = {}
        addresses = [h.address for h in self.hosts.values()] + [str(self.subnet.broadcast_address - 1)]
        for address in addresses:
            result = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True, check=False)
            route = result.stdout.strip()
            if result.returncode == 0 and (" via " in route or f"dev {self.bridge}" not in route):
                escaped[address] = route
        return escaped

    def destroy(self) -> None:
        """Remove the namespaces, links, the bridge and the FORWARD rule, and only then the unreachable route."""
        for host in self.hosts.values():
            sh("ip", "netns", "del", host.netns, check=False)
            sh("ip", "link", "del", host.link, check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        remove_run_network(self.run_id, str(self.subnet))


def remove_run_network(run_id: str, subnet: str | None) -> None:
    """Remove whatever network objects of run `run_id` remain (also those of a run killed before its teardown):
    namespaces, links and FORWARD rules named after it, then the unreachable route of its `subnet`."""
    prefix = f"{PREFIX}{run_id}"
    for line in sh("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"{prefix}-"):
            sh("ip", "netns", "del", name, check=False)
    for line in sh("ip", "-o", "link", "show", check=False).splitlines():
        match = re.match(r"\d+: ([^:@]+)", line)
        if match and match.group(1).startswith(prefix):
            sh("ip", "link", "del", match.group(1), check=False)
    for rule in sh("iptables", "-S", "FORWARD", check=False).splitlines():
        if f"--comment {prefix}" in rule:
            sh("iptables", *rule.replace("-A FORWARD", "-D FORWARD", 1).split(), check=False)
    if subnet:
        sh("ip", "route", "del", "unreachable", subnet, "metric", str(UNREACHABLE_METRIC), check=False)


__all__ = [
    "PREFIX",
    "Host",
    "Network",
    "NamespacesUnavailable",
    "check_available",
    "free_subnet",
    "remove_run_network",
    "sh",
]
