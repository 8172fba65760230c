"""`caractrl describe node NAME`: every field of a node, its heartbeat Lease and the projects bound to it.

Besides spec and status it shows the images present on the node (count, total size and each image's names and
size: what the scheduler counts as already pulled) and, in the Network section, the download rate the node's own
restores observed per BackupRepository.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from caravanserai import v1
from caravanserai.cli.layout import Writer, listing, metadata_fields, write_conditions, write_events
from caravanserai.cli.printers import NONE, age, or_none, when
from caravanserai.cli.tables import bytes_text, cpu_text, services_ready
from caravanserai.client.nodeops import requested
from caravanserai.text.quantity import format_bytes, format_quantity


def _taint(t: v1.Taint) -> str:
    return f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}"


def _resource_text(name: str, quantity: str) -> str:
    if name == "cpu":
        return cpu_text(quantity)
    if name in ("memory", "disk") or name.endswith("storage"):
        return bytes_text(quantity)
    return quantity


def _resources(out: Writer, title: str, values: dict[str, str]) -> None:
    out.heading(title)
    if not values:
        out.lines.append(f"  {NONE}")
        return
    out.fields([(k, _resource_text(k, v)) for k, v in sorted(values.items())], 1)


def allocated(node: v1.Node, projects: Sequence[v1.Project]) -> dict[str, str]:
    """The sum of the requests of the projects bound to `node` (what the scheduler counts as taken)."""
    return {k: format_quantity(v, binary=k == "memory") for k, v in requested(projects).items()}


def _heartbeat(out: Writer, lease: v1.Lease | None, now: float) -> None:
    out.heading("Heartbeat")
    if lease is None:
        out.lines.append(f"  {NONE} (no Lease named after the node)")
        return
    spec = lease.spec
    out.fields(
        [
            ("Holder", or_none(spec.holder_identity)),
            ("Renewed", when(spec.renew_time, now)),
            ("Acquired", when(spec.acquire_time, now)),
            ("Duration", f"{spec.lease_duration_seconds}s"),
            ("Transitions", str(spec.lease_transitions)),
        ],
        1,
    )


def _network(out: Writer, network: v1.NodeNetwork, now: float) -> None:
    out.heading("Network")
    throughput = network.throughput
    out.fields(
        [
            ("Addresses", listing(f"{a.type or 'Address'}: {a.address}" for a in network.addresses)),
            ("Agent Port", str(network.agent_port) if network.agent_port else NONE),
            ("Ingress", ingress_text(network.ingress_port)),
            ("Download", f"{bytes_text(throughput.download)}/s" if throughput.download else NONE),
            ("Upload", f"{bytes_text(throughput.upload)}/s" if throughput.upload else NONE),
            ("Measured", when(throughput.measured_at, now)),
            ("Restore Rates", restore_rates_text(network.restore_rates)),
        ],
        1,
    )


def ingress_text(port: int) -> str:
    """`port 8081 (served by the agent: down while the agent is down)`, `<off>`. The ingress is part of the agent
    process, so an agent that stops or crashes takes this node's ingress with it until it is started again."""
    if not port:
        return "<off>"
    return f"port {port} (served by the agent: down while the agent is down)"


def restore_rates_text(rates: Mapping[str, str]) -> str:
    """`offsite: 85Mi/s, local: 120Mi/s` (per BackupRepository, observed by the node's restores), `<none>`."""
    return ", ".join(f"{repo}: {bytes_text(rate)}/s" for repo, rate in sorted(rates.items())) or NONE


def images_summary(images: Sequence[v1.NodeImage]) -> str:
    """`12 (1.4GiB in all)`, `0`."""
    if not images:
        return "0"
    return f"{len(images)} ({format_bytes(sum(i.size_bytes for i in images))}B in all)"


def _images(out: Writer, images: Sequence[v1.NodeImage]) -> None:
    out.heading("Images", 0, images_summary(images))
    rows = [[", ".join(i.names) or NONE, f"{format_bytes(i.size_bytes)}B"] for i in images]
    out.table(("NAMES", "SIZE"), sorted(rows))


def _system(out: Writer, info: v1.NodeInfo) -> None:
    out.heading("System Info")
    out.fields(
        [
            ("OS Image", or_none(info.os_image)),
            ("Operating System", or_none(info.operating_system)),
            ("Kernel Version", or_none(info.kernel_version)),
            ("Architecture", or_none(info.architecture)),
            ("Docker Version", or_none(info.docker_version)),
            ("Agent Version", or_none(info.agent_version)),
        ],
        1,
    )


def describe_node(
    node: v1.Node, lease: v1.Lease | None, projects: Sequence[v1.Project], events: Sequence[v1.Event], now: float
) -> str:
    """The full description of `node`; `projects` are those bound to it, of every namespace (each named with its
    namespace, as kubectl's describe node lists pods)."""
    out = Writer()
    schedulable = "false (cordoned)" if node.spec.unschedulable else "true"
    out.fields(
        [
            ("Name", node.metadata.name),
            ("Kind", "Node"),
            ("State", or_none(node.status.state, "<unknown>")),
            ("Schedulable", schedulable),
            *metadata_fields(node, now),
        ]
    )
    out.heading("Spec")
    out.fields(
        [
            ("Hostname", or_none(node.spec.hostname)),
            ("Unschedulable", "true" if node.spec.unschedulable else "false"),
            ("Taints", listing(_taint(t) for t in node.spec.taints)),
        ],
        1,
    )
    allowed = ", ".join(node.status.allowed_host_paths) or "any (no --allowed-host-paths)"
    out.fields([("Allowed Host Paths", allowed)])
    _heartbeat(out, lease, now)
    _network(out, node.status.network, now)
    _system(out, node.status.node_info)
    _resources(out, "Capacity", dict(node.status.capacity))
    _resources(out, "Allocatable", dict(node.status.allocatable))
    _resources(out, "Allocated (requests of bound projects)", allocated(node, projects))
    _images(out, node.status.images)
    write_conditions(out, node.status.conditions, now)
    out.heading("Projects")
    rows = [
        [
            p.metadata.namespace or NONE,
            p.metadata.name,
            p.status.phase,
            services_ready(p),
            age(p.metadata.creation_timestamp, now),
        ]
        for p in sorted(projects, key=lambda p: (p.metadata.namespace, p.metadata.name))
    ]
    out.table(("NAMESPACE", "NAME", "PHASE", "SERVICES", "AGE"), rows)
    write_events(out, events, now)
    return out.text()


__all__ = ["allocated", "describe_node", "images_summary", "ingress_text", "restore_rates_text"]
