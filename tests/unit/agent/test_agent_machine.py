"""Agent machine facts, throughput formatting and event helpers (pure parts)."""

from __future__ import annotations

import pathlib

import pytest

from caravanserai.agent.docker.records import container_event, daemon_info, since_text
from caravanserai.agent.host import machine
from caravanserai.agent.host.throughput import format_rate
from caravanserai.text.quantity import parse_quantity


def test_meminfo_total_in_bytes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "meminfo"
    path.write_text("MemTotal:       16318864 kB\nMemFree:         1000 kB\n")
    assert machine.read_meminfo_total(str(path)) == 16318864 * 1024
    assert machine.read_meminfo_total(str(tmp_path / "missing")) is None


def test_os_image_prefers_pretty_name(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "os-release"
    path.write_text('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
    assert machine.read_os_image(str(path)) == "Debian GNU/Linux 12 (bookworm)"
    path.write_text("NAME=Alpine\n")
    assert machine.read_os_image(str(path)) == "Alpine"
    assert machine.read_os_image(str(tmp_path / "missing")) == ""


def test_capacity_and_allocatable_quantities() -> None:
    capacity = machine.Capacity(cpu_millis=4000, memory_bytes=8 * 2**30, disk_bytes=100 * 2**30)
    assert machine.capacity_quantities(capacity) == {"cpu": "4", "memory": "8Gi", "disk": "100Gi"}
    assert machine.allocatable_quantities(capacity, reserved_cpu="500m", reserved_memory="512Mi") == {
        "cpu": "3500m",
        "memory": "7680Mi",
        "disk": "100Gi",
    }
    tiny = machine.Capacity(cpu_millis=250, memory_bytes=2**20)
    assert machine.allocatable_quantities(tiny, reserved_cpu="1", reserved_memory="1Gi") == {"cpu": "0", "memory": "0"}


def test_machine_capacity_reads_docker_root(tmp_path: pathlib.Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1024 kB\n")
    capacity = machine.machine_capacity(daemon_info({"DockerRootDir": str(tmp_path)}), meminfo=str(meminfo))
    assert capacity.cpu_millis >= 1000 and capacity.cpu_millis % 1000 == 0
    assert capacity.memory_bytes == 1024 * 1024
    assert capacity.disk_bytes is not None and capacity.disk_bytes > 0
    info = daemon_info({"MemTotal": 42, "DockerRootDir": "/no/such/dir"})
    fallback = machine.machine_capacity(info, meminfo="/no/such/file")
    assert (fallback.memory_bytes, fallback.disk_bytes) == (42, None)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("10.0.0.1:7420", ("10.0.0.1", 7420)),
        ("api.example:80", ("api.example", 80)),
        ("[::1]:9", ("::1", 9)),
        ("host", ("host", 7420)),
    ],
)
def test_split_host_port(address: str, expected: tuple[str, int]) -> None:
    assert machine.split_host_port(address) == expected


def test_addresses_use_the_route_to_the_server() -> None:
    addresses = machine.node_addresses("127.0.0.1:7420", hostname="box")
    assert [(a.type, a.address) for a in addresses] == [("InternalIP", "127.0.0.1"), ("Hostname", "box")]
    advertised = machine.node_addresses("127.0.0.1:7420", hostname="box", advertise="192.0.2.7")
    assert advertised[0].address == "192.0.2.7"


@pytest.mark.parametrize(
    ("rate", "text"),
    [
        (0.0, "0"),
        (999.0, "999"),
        (12_500_000.0, "12.5M"),
        (850_000.0, "850k"),
        (1_234_567_890.0, "1.2G"),
        (1049.9, "1k"),
    ],
)
def test_format_rate(rate: float, text: str) -> None:
    assert format_rate(rate) == text
    parse_quantity(text)


def test_event_helpers() -> None:
    event = {"Actor": {"Attributes": {"caravanserai.io/project": "web"}}, "timeNano": 1_700_000_000_000_000_123}
    assert container_event(event).project == "default/web"  # labelled before namespaces: `default`
    labelled = {"caravanserai.io/project": "team-a/web", "caravanserai.io/namespace": "team-a"}
    assert container_event({"Actor": {"Attributes": labelled}}).project == "team-a/web"
    assert container_event(event).time_nano == 1_700_000_000_000_000_123
    assert container_event({"Actor": {"Attributes": {}}}).project is None
    died = container_event(
        {"Action": "die", "Actor": {"ID": "c1", "Attributes": {"caravanserai.io/service": "app", "exitCode": "3"}}}
    )
    assert (died.action, died.container_id, died.service, died.exit_code) == ("die", "c1", "app", 3)
    assert container_event({"Action": "start", "Actor": {"ID": "c1", "Attributes": {}}}).exit_code is None
    assert since_text(1_700_000_000_000_000_123) == "1700000000.000000123"
