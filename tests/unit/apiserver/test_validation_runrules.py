"""Validation of how a service's container runs (the Compose keys of the spec), host paths and Docker's memory
minimum: a project using every field is valid, and each table row breaks one rule once, reported at its path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds import validate_object
from caravanserai.errors import Invalid
from caravanserai.project import runoptions


def app() -> v1.Project:
    """One service using every run option, one on the host network, a HostPath volume."""
    return v1.Project(
        api_version="caravanserai/v1",
        kind="Project",
        metadata=v1.ObjectMeta(name="app"),
        spec=v1.ProjectSpec(
            volumes=[v1.Volume(name="site", type=v1.VOLUME_HOST_PATH, host_path="/srv/site")],
            services=[
                v1.Service(
                    name="web",
                    image="web:1",
                    user="1000:1000",
                    cap_add=["NET_ADMIN", "cap_sys_time"],
                    cap_drop=["ALL"],
                    privileged=True,
                    devices=[v1.DeviceMapping(host_path="/dev/fuse", container_path="/dev/fuse", permissions="rw")],
                    tmpfs=[v1.TmpfsMount(mount_path="/run", size="64Mi", mode=0o1777)],
                    shm_size="128Mi",
                    stop_signal="SIGQUIT",
                    stop_grace_period="30s",
                    init=True,
                    extra_hosts=[
                        v1.HostAlias(hostname="db.internal", ip="10.0.0.5"),
                        v1.HostAlias(hostname="gw", ip="host-gateway"),
                    ],
                    labels={"com.example.team": "web", "traefik.http.routers.web.rule": "Host(`a.example`)"},
                    ulimits=[v1.Ulimit(name="nofile", soft=1024, hard=4096), v1.Ulimit(name="core", soft=-1, hard=-1)],
                    sysctls={"net.core.somaxconn": "1024", "kernel.shmmax": "65536", "fs.mqueue.msg_max": "20"},
                    logging=v1.Logging(driver="json-file", options={"max-size": "10m"}),
                    volume_mounts=[v1.VolumeMount(name="site", mount_path="/usr/share/site", read_only=True)],
                    resources=v1.ResourceRequirements(requests={"memory": "6Mi"}, limits={"memory": "64Mi"}),
                ),
                v1.Service(
                    name="agent",
                    image="agent:1",
                    network_mode="host",
                    ports=[v1.ServicePort(container_port=9100, host_port=9100), v1.ServicePort(container_port=9101)],
                    sysctls={"kernel.msgmax": "65536"},
                ),
            ],
        ),
    )


Mutation = Callable[[v1.Project], Any]
WEB = "spec.services[0]"

CASES: list[tuple[Mutation, str, str]] = [
    (lambda p: setattr(p.spec.services[0], "user", "a b"), f"{WEB}.user", 'must be "uid", "uid:gid"'),
    (lambda p: p.spec.services[0].cap_add.append("FLY"), f"{WEB}.capAdd[2]", "must be a Linux capability"),
    (lambda p: p.spec.services[0].cap_add.append("CAP_NET_ADMIN"), f"{WEB}.capAdd[2]", 'duplicate capability'),
    (lambda p: p.spec.services[0].cap_drop.append(""), f"{WEB}.capDrop[1]", "must be a Linux capability"),
    (lambda p: setattr(p.spec.services[0].devices[0], "host_path", ""), f"{WEB}.devices[0].hostPath", "required"),
    (lambda p: setattr(p.spec.services[0].devices[0], "host_path", "dev/x"), f"{WEB}.devices[0].hostPath", "absolute"),
    (
        lambda p: setattr(p.spec.services[0].devices[0], "container_path", "x"),
        f"{WEB}.devices[0].containerPath",
        "absolute",
    ),
    (lambda p: setattr(p.spec.services[0].devices[0], "permissions", "rwx"), f"{WEB}.devices[0].permissions", '"rwm"'),
    (
        lambda p: setattr(p.spec.services[0].devices[0], "permissions", "rr"),
        f"{WEB}.devices[0].permissions",
        "at most once",
    ),
    (lambda p: setattr(p.spec.services[0].tmpfs[0], "mount_path", "run"), f"{WEB}.tmpfs[0].mountPath", "absolute"),
    (
        lambda p: setattr(p.spec.services[0].tmpfs[0], "mount_path", "/usr/share/site"),
        f"{WEB}.tmpfs[0].mountPath",
        "is also the mount path of volumeMounts[0]",
    ),
    (lambda p: p.spec.services[0].tmpfs.add(mount_path="/run"), f"{WEB}.tmpfs[1].mountPath", "duplicate tmpfs"),
    (lambda p: setattr(p.spec.services[0].tmpfs[0], "size", "big"), f"{WEB}.tmpfs[0].size", "quantity"),
    (lambda p: setattr(p.spec.services[0].tmpfs[0], "size", "0"), f"{WEB}.tmpfs[0].size", "at least one byte"),
    (lambda p: setattr(p.spec.services[0].tmpfs[0], "mode", 0o17777), f"{WEB}.tmpfs[0].mode", "between 0 and 0o7777"),
    (lambda p: setattr(p.spec.services[0], "shm_size", "-1Mi"), f"{WEB}.shmSize", "must not be negative"),
    (lambda p: setattr(p.spec.services[0], "stop_signal", "SIGFOO"), f"{WEB}.stopSignal", "signal name"),
    (lambda p: setattr(p.spec.services[0], "stop_grace_period", "soon"), f"{WEB}.stopGracePeriod", "invalid duration"),
    (lambda p: setattr(p.spec.services[0], "stop_grace_period", "2h"), f"{WEB}.stopGracePeriod", "at most 1h"),
    (
        lambda p: setattr(p.spec.services[0].extra_hosts[0], "hostname", "a b"),
        f"{WEB}.extraHosts[0].hostname",
        "whitespace",
    ),
    (lambda p: setattr(p.spec.services[0].extra_hosts[0], "ip", "10.0.0"), f"{WEB}.extraHosts[0].ip", "IPv4 or IPv6"),
    (lambda p: setattr(p.spec.services[0].extra_hosts[0], "ip", ""), f"{WEB}.extraHosts[0].ip", "required"),
    (lambda p: setattr(p.spec.services[0], "network_mode", "bridge"), f"{WEB}.networkMode", 'must be one of "host"'),
    (
        lambda p: setattr(p.spec.services[1].ports[0], "host_port", 8080),
        "spec.services[1].ports[0].hostPort",
        "must be 0 or 9100 (the containerPort) with networkMode host",
    ),
    (
        lambda p: setattr(p.spec.services[1].ports[1], "host_ip", "127.0.0.1"),
        "spec.services[1].ports[1].hostIp",
        "must be empty with networkMode host",
    ),
    (
        lambda p: p.spec.services[0].labels.update({"caravanserai.io/service": "x"}),
        f'{WEB}.labels["caravanserai.io/service"]',
        "reserved for the agent's own labels",
    ),
    (lambda p: p.spec.services[0].labels.update({"a b": "x"}), f'{WEB}.labels["a b"]', "without whitespace"),
    (lambda p: setattr(p.spec.services[0].ulimits[0], "name", "files"), f"{WEB}.ulimits[0].name", '"nofile"'),
    (lambda p: p.spec.services[0].ulimits.add(name="nofile"), f"{WEB}.ulimits[2].name", "duplicate ulimit"),
    (lambda p: setattr(p.spec.services[0].ulimits[0], "soft", 8192), f"{WEB}.ulimits[0].soft", "soft 8192 > hard 4096"),
    (lambda p: setattr(p.spec.services[0].ulimits[0], "hard", -2), f"{WEB}.ulimits[0].hard", "at least 0 (or -1"),
    (
        lambda p: p.spec.services[0].sysctls.update({"vm.swappiness": "1"}),
        f'{WEB}.sysctls["vm.swappiness"]',
        "only namespaced sysctls",
    ),
    (
        lambda p: p.spec.services[1].sysctls.update({"net.core.somaxconn": "1"}),
        'spec.services[1].sysctls["net.core.somaxconn"]',
        "networkMode host",
    ),
    (lambda p: setattr(p.spec.services[0].logging, "driver", "json file"), f"{WEB}.logging.driver", "log driver"),
    (lambda p: setattr(p.spec.services[0].logging, "driver", ""), f"{WEB}.logging.driver", "required with options"),
    (lambda p: setattr(p.spec.volumes[0], "host_path", ""), "spec.volumes[0].hostPath", "is required"),
    (lambda p: setattr(p.spec.volumes[0], "host_path", "srv"), "spec.volumes[0].hostPath", "absolute path"),
    (lambda p: setattr(p.spec.volumes[0], "host_path", "/srv:x"), "spec.volumes[0].hostPath", "must not contain ':'"),
    (
        lambda p: setattr(p.spec.volumes[0], "type", "Persistent"),
        "spec.volumes[0].hostPath",
        "only for volumes of type HostPath",
    ),
    (
        lambda p: p.spec.services[0].resources.requests.update({"memory": "5Mi"}),
        f'{WEB}.resources.requests["memory"]',
        "must be at least 6Mi (Docker's minimum for a container), not 5Mi",
    ),
    (
        lambda p: (
            p.spec.services[0].resources.limits.update({"memory": "4000000"}),
            p.spec.services[0].resources.requests.clear(),
        ),
        f'{WEB}.resources.limits["memory"]',
        "must be at least 6Mi",
    ),
]  # fmt: skip


def test_a_project_using_every_run_option_is_valid() -> None:
    validate_object("projects", app())


@pytest.mark.parametrize(("mutate", "path", "message"), [pytest.param(*c, id=c[1] + c[2]) for c in CASES])
def test_rules(mutate: Mutation, path: str, message: str) -> None:
    project = app()
    mutate(project)
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    violations = [(v.field, v.description) for v in info.value.violations]
    assert [field for field, _ in violations] == [path], violations
    assert message in violations[0][1]


def test_names_become_dockers_forms() -> None:
    assert runoptions.capability("net_admin") == runoptions.capability("CAP_NET_ADMIN") == "CAP_NET_ADMIN"
    assert runoptions.capability("all") == "ALL"
    assert runoptions.stop_signal("quit") == "SIGQUIT"
    assert runoptions.stop_signal("SIGRTMIN") is None
    assert runoptions.stop_grace_seconds(v1.Service(stop_grace_period="1500ms")) == 2
    assert runoptions.stop_grace_seconds(v1.Service()) is None


@pytest.mark.parametrize(
    ("allowed", "path", "covered"),
    [
        ([], "/anything", True),
        (["/srv"], "/srv", True),
        (["/srv"], "/srv/site", True),
        (["/srv/"], "/srv/site/a", True),
        (["/srv"], "/srvx", False),
        (["/srv"], "/srv/../etc", False),
        (["/data", "/srv"], "/etc", False),
        (["/"], "/etc", True),
    ],
)
def test_an_allow_list_covers_its_entries_and_what_is_under_them(allowed: list[str], path: str, covered: bool) -> None:
    assert runoptions.uncovered([path], allowed) == ([] if covered else [path])
