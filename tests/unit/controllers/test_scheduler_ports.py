"""Host ports as a node resource: the port index, the holds a project's status makes, the NodePorts filter and
the Unschedulable message it adds to."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.clock import timestamp
from caravanserai.controllers.scheduler.algorithm import Diagnosis
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.filters import (
    FILTERS,
    NO_FREE_PORTS,
    RANK_PORTS,
    FilterContext,
    Rejection,
    checks_for,
    ports_free,
)
from caravanserai.controllers.scheduler.ports import HostPort, PortIndex, holds_of, host_ports
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, project_info
from caravanserai.testing.builders import node, node_status, project

NOW = 1_000_000.0
CTX = FilterContext(now=NOW)


def publishing(name: str, *ports: tuple[int, str, str], node_ref: str = "", phase: str = v1.PENDING) -> v1.Project:
    p = project(name)
    for host_port, protocol, host_ip in ports:
        p.spec.services[0].ports.add(container_port=80, host_port=host_port, protocol=protocol, host_ip=host_ip)
    p.spec.services[0].ports.add(container_port=9000)  # not published on the host: never counted
    p.metadata.generation, p.metadata.resource_version = 1, "1"
    p.status.phase, p.status.node_ref = phase, node_ref
    return p


def test_host_ports_are_read_from_every_service_with_a_host_port() -> None:
    p = publishing("web", (8080, "", ""), (53, "udp", "10.0.0.1"), (8080, "TCP", ""))
    assert host_ports(p.spec) == (HostPort(53, "UDP", "10.0.0.1"), HostPort(8080, "TCP", ""))
    assert host_ports(project("quiet").spec) == ()


def test_a_service_on_the_host_network_takes_its_container_ports_on_the_host() -> None:
    p = project("edge")
    p.spec.services[0].network_mode = v1.NETWORK_MODE_HOST
    p.spec.services[0].ports.add(container_port=8443)
    p.spec.services[0].ports.add(container_port=53, host_port=53, protocol="UDP")
    assert host_ports(p.spec) == (HostPort(53, "UDP", ""), HostPort(8443, "TCP", ""))


@pytest.mark.parametrize(
    ("taken", "wanted", "conflict"),
    [
        (HostPort(8080), HostPort(8080), True),
        (HostPort(8080), HostPort(8081), False),
        (HostPort(8080, "TCP"), HostPort(8080, "UDP"), False),  # another protocol
        (HostPort(8080, host_ip="10.0.0.1"), HostPort(8080, host_ip="10.0.0.2"), False),  # other addresses
        (HostPort(8080, host_ip="10.0.0.1"), HostPort(8080), True),  # every address includes it
        (HostPort(8080, host_ip="0.0.0.0"), HostPort(8080, host_ip="10.0.0.1"), True),
        (HostPort(8080, host_ip="::"), HostPort(8080, host_ip="127.0.0.1"), True),
    ],
)
def test_port_conflicts_follow_dockers_rule(taken: HostPort, wanted: HostPort, conflict: bool) -> None:
    index = PortIndex()
    index.add("other", (taken,))
    assert (index.conflict("p", (wanted,), now=NOW) is not None) == conflict
    assert index.conflict("other", (wanted,), now=NOW) is None  # never with itself


def test_a_hold_with_a_deadline_counts_until_it_and_removal_empties_the_index() -> None:
    index = PortIndex()
    index.add("old", (HostPort(80),), until=NOW + 10)
    assert index.conflict("p", (HostPort(80),), now=NOW + 9.9) == HostPort(80)
    assert index.conflict("p", (HostPort(80),), now=NOW + 10) is None
    index.remove("old", (HostPort(80),))
    assert not index


def test_holds_follow_the_binding_and_the_hand_off() -> None:
    ports = (HostPort(80),)
    running = publishing("web", (80, "", ""), node_ref="n1", phase=v1.RUNNING)
    assert [(h.node, h.until) for h in holds_of(running, ports)] == [("n1", None)]
    moved = publishing("web", (80, "", ""))
    moved.status.previous_node_ref = "n1"
    moved.status.handoff_deadline.CopyFrom(timestamp(NOW + 300))
    assert [(h.node, h.until) for h in holds_of(moved, ports)] == [("n1", NOW + 300)]
    moved.status.phase, moved.status.node_ref = v1.SCHEDULED, "n2"  # bound elsewhere, the old copy still runs
    assert [(h.node, h.until) for h in holds_of(moved, ports)] == [("n2", None), ("n1", NOW + 300)]
    finished = publishing("db", (5432, "", ""))
    finished.status.previous_node_ref = "n1"  # finish_move: no deadline, its services were stopped
    assert holds_of(finished, (HostPort(5432),)) == ()
    failed = publishing("web", (80, "", ""), node_ref="n1", phase=v1.FAILED)  # exited containers hold nothing
    assert holds_of(failed, ports) == ()


def test_the_filter_refuses_a_node_where_another_project_holds_a_port() -> None:
    n1 = NodeInfo("n1")
    n1.ports.add("other", (HostPort(8080),))
    wants = ProjectInfo("p", host_ports=(HostPort(8080),))
    assert ports_free(wants, n1, CTX) == Rejection(NO_FREE_PORTS, False, RANK_PORTS)
    assert ports_free(ProjectInfo("p", host_ports=(HostPort(8081),)), n1, CTX) is None
    assert ports_free(ProjectInfo("other", host_ports=(HostPort(8080),)), n1, CTX) is None
    assert ports_free in checks_for(wants) and ports_free not in checks_for(ProjectInfo("p"))  # skipped: no ports
    assert "NodePorts" in [f.name for f in FILTERS]
    diagnosis = Diagnosis(
        total=2, rejections={Rejection(NO_FREE_PORTS, False, 5): 1, Rejection("NotReady", False, 0): 1}
    )
    assert diagnosis.message() == "0/2 nodes are available: 1 NotReady, 1 node(s) didn't have free ports."


def test_cluster_state_indexes_ports_incrementally_bound_assumed_and_handed_off() -> None:
    state = ClusterState()
    for name in ("n1", "n2"):
        state.upsert_node(node_status(node(name)))
    n1, n2 = state.node("n1"), state.node("n2")
    assert n1 is not None and n2 is not None
    port = (HostPort(8080),)
    web = publishing("web", (8080, "", ""), node_ref="n1", phase=v1.RUNNING)
    state.observe_project(None, web)
    assert n1.ports.conflict("api", port, now=NOW) and not n2.ports.conflict("api", port, now=NOW)

    api = project_info(publishing("api", (8080, "", "")))
    assumption = state.assume(api, "n2")  # counted on n2 before the bind is even written
    assert n2.ports.conflict("other", port, now=NOW)
    state.forget(assumption)
    assert not n2.ports

    moved = publishing("web", (8080, "", ""))  # drained off n1 with a hand-off: the old copy keeps the port
    moved.metadata.resource_version = "2"
    moved.status.previous_node_ref = "n1"
    moved.status.handoff_deadline.CopyFrom(timestamp(NOW + 300))
    state.observe_project(web, moved)  # its requests leave n1; its port stays held there
    assert n1.ports.conflict("api", port, now=NOW) and not n1.ports.conflict("api", port, now=NOW + 300)
    arrived = publishing("web", (8080, "", ""), node_ref="n2", phase=v1.RUNNING)  # runs on n2: hand-off over
    arrived.metadata.resource_version = "3"
    assert state.observe_project(moved, arrived).freed
    assert not n1.ports and n2.ports.conflict("api", port, now=NOW)
    assert state.forget_project(arrived).freed
    assert not n2.ports
