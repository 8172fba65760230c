"""The Compose keys of a service in its Docker create body (pure): each field lands where Docker reads it, the
service's labels sit under ours, the host network maps nothing, HostPath volumes are binds, and a change of any of
them (or of a mounted volume's host path) changes the service's spec hash, recreating that service only."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.agent.docker import containers, naming
from caravanserai.agent.docker.records import observe


def project() -> v1.Project:
    p = v1.Project()
    p.metadata.name, p.metadata.uid, p.metadata.generation = "edge", "uid-1", 2
    p.spec.volumes.add(name="site", type=v1.VOLUME_HOST_PATH, host_path="/srv/site")
    p.spec.volumes.add(name="logs", type=v1.VOLUME_HOST_PATH, host_path="/var/log/edge")
    p.spec.services.add(name="web", image="caravanserai/busybox:test")
    p.spec.services.add(name="other", image="caravanserai/busybox:test")
    return p


def every_option(service: v1.Service) -> None:
    service.user = "1000:1000"
    service.cap_add.extend(["net_admin", "CAP_SYS_TIME"])
    service.cap_drop.append("all")
    service.privileged = True
    service.devices.add(host_path="/dev/fuse")
    service.devices.add(host_path="/dev/snd", container_path="/dev/audio", permissions="r")
    service.tmpfs.add(mount_path="/run", size="64Mi", mode=0o1777)
    service.tmpfs.add(mount_path="/cache")
    service.shm_size = "128Mi"
    service.stop_signal = "quit"
    service.stop_grace_period = "1m30s"
    service.init = True
    service.extra_hosts.add(hostname="db.internal", ip="10.0.0.5")
    service.labels.update({"com.example.team": "web", naming.LABEL_SERVICE: "spoofed"})
    service.ulimits.add(name="nofile", soft=1024, hard=4096)
    service.ulimits.add(name="core", soft=-1, hard=-1)
    service.sysctls.update({"net.core.somaxconn": "1024"})
    service.logging.driver = "json-file"
    service.logging.options.update({"max-size": "10m"})
    service.volume_mounts.add(name="site", mount_path="/usr/share/site", read_only=True)
    service.volume_mounts.add(name="logs", mount_path="/logs")


def test_every_run_option_lands_where_docker_reads_it() -> None:
    p = project()
    every_option(p.spec.services[0])
    body = containers.container_config(p, p.spec.services[0], node="n1")
    host = body["HostConfig"]
    assert (body["User"], body["StopSignal"], body["StopTimeout"]) == ("1000:1000", "SIGQUIT", 90)
    assert body["Labels"]["com.example.team"] == "web"
    assert body["Labels"][naming.LABEL_SERVICE] == "web"  # ours win
    assert body["Labels"][naming.LABEL_STOP_TIMEOUT] == "90"
    assert host["CapAdd"] == ["CAP_NET_ADMIN", "CAP_SYS_TIME"] and host["CapDrop"] == ["ALL"]
    assert host["Privileged"] is True and host["Init"] is True
    assert host["Devices"] == [
        {"PathOnHost": "/dev/fuse", "PathInContainer": "/dev/fuse", "CgroupPermissions": "rwm"},
        {"PathOnHost": "/dev/snd", "PathInContainer": "/dev/audio", "CgroupPermissions": "r"},
    ]
    assert host["Tmpfs"] == {"/run": f"size={64 * 2**20},mode=1777", "/cache": ""}
    assert host["ShmSize"] == 128 * 2**20
    assert host["ExtraHosts"] == ["db.internal:10.0.0.5"]
    assert host["Ulimits"] == [{"Name": "nofile", "Soft": 1024, "Hard": 4096}, {"Name": "core", "Soft": -1, "Hard": -1}]
    assert host["Sysctls"] == {"net.core.somaxconn": "1024"}
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-size": "10m"}}
    assert host["Binds"] == ["/srv/site:/usr/share/site:ro", "/var/log/edge:/logs"]
    assert host["NetworkMode"] == naming.network_name("edge", "n1")


def test_a_service_that_sets_none_of_them_gets_none_of_dockers_fields() -> None:
    p = project()
    body = containers.container_config(p, p.spec.services[1], node="n1")
    added = {"User", "StopSignal", "StopTimeout"} | {"CapAdd", "Privileged", "Binds", "Tmpfs", "LogConfig", "Init"}
    assert not added & (set(body) | set(body["HostConfig"]))
    assert naming.LABEL_STOP_TIMEOUT not in body["Labels"]


def test_the_host_network_joins_no_project_network_and_maps_no_port() -> None:
    p = project()
    service = p.spec.services[0]
    service.network_mode = v1.NETWORK_MODE_HOST
    service.ports.add(container_port=9100, host_port=9100)
    body = containers.container_config(p, service, node="n1")
    assert body["HostConfig"]["NetworkMode"] == "host"
    assert "NetworkingConfig" not in body and "PortBindings" not in body["HostConfig"]
    inspected = observe({"Config": {"Labels": {}}, "NetworkSettings": {"Networks": {"host": {"IPAddress": ""}}}})
    assert inspected.ip == "127.0.0.1"  # where the agent's health checks and ingress reach it


def test_a_change_of_a_run_option_or_a_mounted_host_path_recreates_that_service_only() -> None:
    p = project()
    every_option(p.spec.services[0])
    web, other = (containers.container_labels(p, s, node="n1")[naming.LABEL_SPEC_HASH] for s in p.spec.services)
    for change in (
        lambda q: setattr(q.spec.services[0], "stop_signal", "SIGINT"),
        lambda q: q.spec.services[0].ulimits[0].__setattr__("soft", 2048),
        lambda q: q.spec.services[0].labels.update({"x": "y"}),
        lambda q: setattr(q.spec.volumes[0], "host_path", "/srv/other"),
    ):
        q = v1.Project()
        q.CopyFrom(p)
        change(q)
        labels = [containers.container_labels(q, s, node="n1")[naming.LABEL_SPEC_HASH] for s in q.spec.services]
        assert labels[0] != web and labels[1] == other


def test_the_agent_stops_a_container_within_its_services_grace_period() -> None:
    assert naming.stop_timeout({naming.LABEL_STOP_TIMEOUT: "90"}, 10) == 90
    assert naming.stop_timeout({}, 10) == 10
    labels = {naming.LABEL_STOP_TIMEOUT: "90"}
    assert observe({"Config": {"Labels": labels}}).stop_timeout == 90
    assert observe({"Config": {"Labels": {}}}).stop_timeout is None
