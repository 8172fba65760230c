"""Agent container specs: a project's service as a Docker create configuration (pure)."""

from __future__ import annotations

import json

import pytest

from caravanserai import v1
from caravanserai.agent.docker import containers, naming


def make_project(**service_fields: object) -> v1.Project:
    project = v1.Project()
    project.metadata.name = "shop"
    project.metadata.uid = "uid-1"
    project.metadata.generation = 3
    project.spec.volumes.add(name="data", type="Persistent")
    project.spec.volumes.add(name="cache")
    service = project.spec.services.add(name="web", image="caravanserai/busybox:test")
    for key, value in service_fields.items():
        if isinstance(value, list):
            getattr(service, key).extend(value)
        else:
            setattr(service, key, value)
    return project


def test_full_service_maps_to_docker_fields() -> None:
    project = make_project(
        command=["httpd", "-f"],
        args=["-p", "8080"],
        working_dir="/srv",
        restart_policy="OnFailure",
    )
    service = project.spec.services[0]
    service.env.add(name="GREETING", value="hi=there")
    service.ports.add(container_port=8080, host_port=18080, host_ip="127.0.0.1")
    service.ports.add(container_port=53, protocol="UDP")
    service.volume_mounts.add(name="data", mount_path="/data", read_only=True)
    service.resources.limits.update({"cpu": "1500m", "memory": "256Mi"})
    service.resources.requests.update({"cpu": "250m", "memory": "64Mi", "gpu": "1"})

    config = containers.container_config(project, service, node="n1")

    assert config["Image"] == "caravanserai/busybox:test"
    assert config["Entrypoint"] == ["httpd", "-f"]
    assert config["Cmd"] == ["-p", "8080"]
    assert config["WorkingDir"] == "/srv"
    assert config["Hostname"] == "web"
    assert config["Env"] == [
        "GREETING=hi=there",  # the service's own environment, then the variables of what it was granted
        "CARA_NODE_NAME=n1",
        "CARA_NAMESPACE=default",
        "CARA_PROJECT=shop",
        "CARA_SERVICE=web",
        "CARA_CPU_REQUEST=250",
        "CARA_MEMORY_REQUEST=67108864",
        "CARA_CPU_LIMIT=1500",
        "CARA_MEMORY_LIMIT=268435456",
        "CARA_RESOURCE_GPU=1",
    ]
    assert "DeviceRequests" not in config["HostConfig"]  # gpu is counted, not a device
    assert config["ExposedPorts"] == {"8080/tcp": {}, "53/udp": {}}
    host = config["HostConfig"]
    assert host["PortBindings"] == {"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18080"}]}
    assert host["Mounts"] == [{"Type": "volume", "Source": "cara_shop_data_n1", "Target": "/data", "ReadOnly": True}]
    assert host["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 0}
    assert host["NanoCpus"] == 1_500_000_000
    assert host["Memory"] == 256 * 2**20
    assert host["CpuShares"] == 256
    assert host["MemoryReservation"] == 64 * 2**20
    assert host["NetworkMode"] == "cara_shop_n1"
    assert config["NetworkingConfig"] == {"EndpointsConfig": {"cara_shop_n1": {"Aliases": ["web"]}}}
    assert config["Labels"] == {
        naming.LABEL_MANAGED: "true",
        naming.LABEL_NODE: "n1",
        naming.LABEL_PROJECT: "shop",
        naming.LABEL_NAMESPACE: "default",
        naming.LABEL_PROJECT_UID: "uid-1",
        naming.LABEL_SERVICE: "web",
        naming.LABEL_GENERATION: "3",
        naming.LABEL_SPEC_HASH: containers.spec_hash(service),
    }


def test_minimal_service_leaves_optional_fields_out() -> None:
    project = make_project(command=["sleep", "60"])
    config = containers.container_config(project, project.spec.services[0], node="n1")
    assert "Cmd" not in config  # the image's CMD is dropped by Docker when Entrypoint is set
    assert "ExposedPorts" not in config and "WorkingDir" not in config
    host = config["HostConfig"]
    assert "PortBindings" not in host and "Mounts" not in host
    assert not {"NanoCpus", "Memory", "CpuShares", "MemoryReservation"} & host.keys()
    assert host["RestartPolicy"]["Name"] == "always"


def test_args_without_command_keep_the_image_entrypoint() -> None:
    project = make_project(args=["sleep", "60"])
    config = containers.container_config(project, project.spec.services[0], node="n1")
    assert "Entrypoint" not in config and config["Cmd"] == ["sleep", "60"]


@pytest.mark.parametrize(
    ("policy", "docker"), [("", "always"), ("Always", "always"), ("OnFailure", "on-failure"), ("Never", "no")]
)
def test_restart_policies(policy: str, docker: str) -> None:
    project = make_project(command=["true"], restart_policy=policy)
    config = containers.container_config(project, project.spec.services[0], node="n1")
    assert config["HostConfig"]["RestartPolicy"]["Name"] == docker


def test_tiny_cpu_request_still_gets_the_minimum_shares() -> None:
    resources = v1.ResourceRequirements(requests={"cpu": "1m"})
    assert containers.resource_settings(resources) == {"CpuShares": 2}


def test_spec_hash_tracks_exactly_the_service_spec() -> None:
    project = make_project(command=["sleep", "60"])
    service = project.spec.services[0]
    same = v1.Service()
    same.CopyFrom(service)
    assert containers.spec_hash(same) == containers.spec_hash(service)
    assert len(containers.spec_hash(service)) == 16
    changed = v1.Service()
    changed.CopyFrom(service)
    changed.env.add(name="X", value="1")
    assert containers.spec_hash(changed) != containers.spec_hash(service)
    # Metadata that is not part of the service spec does not matter.
    project.metadata.generation = 9
    assert containers.spec_hash(project.spec.services[0]) == containers.spec_hash(same)


def test_network_and_volume_configs_carry_owner_labels() -> None:
    project = make_project(command=["true"])
    network = containers.network_config(project, node="n1")
    assert network["Name"] == "cara_shop_n1" and network["Driver"] == "bridge"
    assert network["Labels"][naming.LABEL_PROJECT_UID] == "uid-1"
    pool = containers.pool_network_config("cara_pool.ab12_n1", node="n1")
    assert pool["Name"] == "cara_pool.ab12_n1" and naming.LABEL_PROJECT not in pool["Labels"]
    on_pool = containers.container_config(project, project.spec.services[0], node="n1", network="cara_pool.ab12_n1")
    assert on_pool["HostConfig"]["NetworkMode"] == "cara_pool.ab12_n1"
    assert list(on_pool["NetworkingConfig"]["EndpointsConfig"]) == ["cara_pool.ab12_n1"]
    persistent = containers.volume_config(project, project.spec.volumes[0], node="n1")
    ephemeral = containers.volume_config(project, project.spec.volumes[1], node="n1")
    assert persistent["Name"] == "cara_shop_data_n1"
    assert persistent["Labels"][naming.LABEL_VOLUME_TYPE] == "Persistent"
    assert ephemeral["Labels"][naming.LABEL_VOLUME_TYPE] == "Ephemeral"
    assert ephemeral["Labels"][naming.LABEL_VOLUME] == "cache"


def _pinned_project() -> v1.Project:
    """A project whose one service sets every field the create configuration reads."""
    project = make_project(command=["httpd", "-f"], args=["-p", "8080"], working_dir="/srv", restart_policy="OnFailure")
    service = project.spec.services[0]
    service.env.add(name="GREETING", value="hi=there")
    service.ports.add(container_port=8080, host_port=18080, host_ip="127.0.0.1")
    service.ports.add(container_port=53, protocol="UDP")
    service.volume_mounts.add(name="data", mount_path="/data", read_only=True)
    service.resources.limits.update({"cpu": "1500m", "memory": "256Mi"})
    service.resources.requests.update({"cpu": "250m", "memory": "64Mi", "nvidia.com/gpu": "2"})
    service.healthcheck.exec.command.extend(["true"])
    service.healthcheck.interval = "5s"
    return project


# Pinned values: containers made by an earlier agent are adopted only when their spec-hash label matches, and
# their configuration is the one below. A change of the hash recreates every container of every running project
# (labels are not compared: the namespace label, added with namespaces, leaves containers of `default` as they are).
PINNED_BODY = (
    '{"Image":"caravanserai/busybox:test","Hostname":"web","Env":["GREETING=hi=there","TOKEN=s3cret",'
    '"CARA_NODE_NAME=n1","CARA_NAMESPACE=default","CARA_PROJECT=shop","CARA_SERVICE=web","CARA_CPU_REQUEST=250",'
    '"CARA_MEMORY_REQUEST=67108864","CARA_CPU_LIMIT=1500","CARA_MEMORY_LIMIT=268435456",'
    '"CARA_RESOURCE_NVIDIA_COM_GPU=2"],'
    '"Labels":{"caravanserai.io/managed":"true","caravanserai.io/node":"n1","caravanserai.io/project":"shop",'
    '"caravanserai.io/namespace":"default","caravanserai.io/project-uid":"uid-1","caravanserai.io/service":"web",'
    '"caravanserai.io/generation":"3",'
    '"caravanserai.io/spec-hash":"29aa313f7944208d"},'
    '"HostConfig":{"NetworkMode":"cara_pool.ab12_n1","RestartPolicy":{"Name":"on-failure","MaximumRetryCount":0},'
    '"NanoCpus":1500000000,"Memory":268435456,"CpuShares":256,"MemoryReservation":67108864,'
    '"PortBindings":{"8080/tcp":[{"HostIp":"127.0.0.1","HostPort":"18080"}]},'
    '"Mounts":[{"Type":"volume","Source":"cara_shop_data_n1","Target":"/data","ReadOnly":true},'
    '{"Type":"bind","Source":"/var/lib/cara/d","Target":"/etc/app","ReadOnly":true}],'
    '"DeviceRequests":[{"Driver":"nvidia","Count":2,"Capabilities":[["gpu"]]}]},'
    '"NetworkingConfig":{"EndpointsConfig":{"cara_pool.ab12_n1":{"Aliases":["web"]}}},'
    '"Entrypoint":["httpd","-f"],"Cmd":["-p","8080"],"ExposedPorts":{"8080/tcp":{},"53/udp":{}},"WorkingDir":"/srv",'
    '"Healthcheck":{"Test":["CMD","true"],"Interval":5000000000,"Timeout":5000000000,"Retries":3,"StartPeriod":0}}'
)
PINNED_MINIMAL_BODY = (
    '{"Image":"redis:7","Hostname":"db","Env":["CARA_NODE_NAME=n1","CARA_NAMESPACE=default","CARA_PROJECT=shop",'
    '"CARA_SERVICE=db"],'
    '"Labels":{"caravanserai.io/managed":"true","caravanserai.io/node":"n1","caravanserai.io/project":"shop",'
    '"caravanserai.io/namespace":"default","caravanserai.io/project-uid":"uid-1","caravanserai.io/service":"db",'
    '"caravanserai.io/generation":"1",'
    '"caravanserai.io/spec-hash":"750917e99bd8f15a"},'
    '"HostConfig":{"NetworkMode":"cara_shop_n1","RestartPolicy":{"Name":"always","MaximumRetryCount":0}},'
    '"NetworkingConfig":{"EndpointsConfig":{"cara_shop_n1":{"Aliases":["db"]}}}}'
)


def test_spec_hash_and_create_body_are_pinned() -> None:
    project = _pinned_project()
    service = project.spec.services[0]
    assert containers.spec_hash(service) == "8a38777e0553b124"
    assert containers.spec_hash(service, "d1g") == "29aa313f7944208d"
    inputs = containers.ServiceInputs(
        ("GREETING=hi=there", "TOKEN=s3cret"), mounts=(("/var/lib/cara/d", "/etc/app"),), digest="d1g"
    )
    body = containers.container_config(project, service, node="n1", inputs=inputs, network="cara_pool.ab12_n1")
    assert json.dumps(body, separators=(",", ":")) == PINNED_BODY  # key order included

    minimal = v1.Project()
    minimal.metadata.name, minimal.metadata.uid, minimal.metadata.generation = "shop", "uid-1", 1
    minimal.spec.services.add(name="db", image="redis:7")
    body = containers.container_config(minimal, minimal.spec.services[0], node="n1")
    assert json.dumps(body, separators=(",", ":")) == PINNED_MINIMAL_BODY
