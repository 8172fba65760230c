"""Server-side validation: valid objects pass; each rule has a table row that breaks it exactly once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds import validate_object, validate_status
from caravanserai.apiserver.validation import MAX_ITEMS, MAX_MAP_ENTRIES, MAX_STRING_BYTES, MAX_VIOLATIONS
from caravanserai.errors import Invalid

Mutation = Callable[[Any], object]


def valid_project() -> v1.Project:
    """A project exercising every field the rules look at."""
    project = v1.Project(
        api_version="caravanserai/v1",
        kind="Project",
        metadata=v1.ObjectMeta(
            name="shop",
            labels={"tier": "web", "example.com/team": "blue", "empty": ""},
            annotations={"example.com/note": "free text, any characters: ü ✓", "owner": ""},
            finalizers=["caravanserai.io/agent"],
        ),
        spec=v1.ProjectSpec(
            services=[
                v1.Service(
                    name="web",
                    image="registry.local:5000/shop/web:1.2@sha256:abc",
                    command=["/bin/web"],
                    args=["--port", "8080"],
                    env=[v1.EnvVar(name="MODE", value="production"), v1.EnvVar(name="EMPTY")],
                    ports=[
                        v1.ServicePort(container_port=8080, host_port=80, name="http"),
                        v1.ServicePort(container_port=8080, host_port=80, protocol="UDP"),
                        v1.ServicePort(container_port=9090, host_ip="127.0.0.1"),
                    ],
                    volume_mounts=[v1.VolumeMount(name="data", mount_path="/data", read_only=True)],
                    resources=v1.ResourceRequirements(
                        requests={"cpu": "500m", "memory": "256Mi", "example.com/gpu": "1"},
                        limits={"cpu": "1", "memory": "256Mi"},
                    ),
                    restart_policy="OnFailure",
                    working_dir="/srv",
                ),
                v1.Service(
                    name="db",
                    image="postgres:16",
                    ports=[v1.ServicePort(container_port=5432, protocol="TCP", host_ip="::1")],
                    volume_mounts=[v1.VolumeMount(name="data", mount_path="/var/lib/postgresql")],
                    resources=v1.ResourceRequirements(limits={"memory": "1Gi"}),
                ),
            ],
            volumes=[v1.Volume(name="data", type="Persistent"), v1.Volume(name="tmp")],
            ingress=[
                v1.Ingress(
                    name="www",
                    host="shop.example.com",
                    target=v1.IngressTarget(service="web", port=8080),
                    access=v1.IngressAccess(scope="Public"),
                ),
                v1.Ingress(name="admin", host="admin", target=v1.IngressTarget(service="web", port=9090)),
            ],
            node_selector={"disk": "ssd", "example.com/zone": "a"},
            tolerations=[
                v1.Toleration(key="dedicated", value="shop", effect="NoSchedule"),
                v1.Toleration(key="gpu", operator="Exists"),
                v1.Toleration(operator="Exists"),
            ],
            priority=-5,
        ),
    )
    project.spec.expire_at.FromJsonString("2030-01-01T00:00:00Z")
    return project


def valid_node() -> v1.Node:
    return v1.Node(
        metadata=v1.ObjectMeta(name="node-1.example.com", labels={"disk": "ssd"}),
        spec=v1.NodeSpec(
            hostname="node-1",
            taints=[
                v1.Taint(key="dedicated", value="shop", effect="NoSchedule"),
                v1.Taint(key="dedicated", value="shop", effect="NoExecute"),
            ],
        ),
    )


def valid_lease() -> v1.Lease:
    return v1.Lease(
        metadata=v1.ObjectMeta(name="node-1.example.com"),
        spec=v1.LeaseSpec(holder_identity="node-1", lease_duration_seconds=40),
    )


def valid_event() -> v1.Event:
    return v1.Event(
        metadata=v1.ObjectMeta(name="shop.17a3f"),
        spec=v1.EventSpec(
            involved_object=v1.ObjectReference(kind="Project", name="shop"),
            type="Normal",
            reason="Scheduled",
            message="assigned to node-1",
            count=1,
        ),
    )


def project_status() -> v1.Project:
    project = valid_project()
    project.status.phase = "Running"
    project.status.node_ref = "node-1.example.com"
    project.status.conditions.add(type="Scheduled", status="True", reason="Scheduled")
    project.status.conditions.add(type="Ready", status="Unknown")
    project.status.services.add(name="web", container_id="abc", state="running", ready=True)
    project.status.services.add(name="db", restart_count=3, exit_code=-1)
    project.status.observed_generation = 2
    return project


def node_status() -> v1.Node:
    node = valid_node()
    node.status.state = "Ready"
    node.status.conditions.add(type="Ready", status="True")
    node.status.conditions.add(type="MemoryPressure", status="False")
    node.status.capacity.update({"cpu": "4", "memory": "16Gi", "gpu": "2"})
    node.status.allocatable.update({"cpu": "3500m", "memory": "15Gi"})
    node.status.network.addresses.add(type="InternalIP", address="10.0.0.5")
    node.status.network.agent_port = 7421
    node.status.network.throughput.download = "12.5M"
    return node


def test_valid_objects_pass() -> None:
    validate_object("projects", valid_project())
    validate_object("nodes", valid_node())
    validate_object("leases", valid_lease())
    validate_object("events", valid_event())
    validate_object("leases", v1.Lease(metadata=v1.ObjectMeta(name="cara-scheduler")))
    validate_status("projects", project_status())
    validate_status("nodes", node_status())
    validate_status("nodes", valid_node())
    validate_status("leases", valid_lease())
    validate_status("events", valid_event())


def test_limits_at_their_maximum_pass() -> None:
    project = valid_project()
    project.metadata.labels.clear()
    project.metadata.labels.update({f"k{i}": "v" for i in range(MAX_MAP_ENTRIES)})
    project.spec.services[0].args[:] = ["x" * MAX_STRING_BYTES] * 3
    project.spec.services[1].env.extend(v1.EnvVar(name=f"V{i}") for i in range(MAX_ITEMS))
    validate_object("projects", project)


def test_annotations_share_one_budget_instead_of_the_string_and_entry_limits() -> None:
    project = valid_project()
    project.metadata.annotations["example.com/last-applied"] = _long(200_000)
    project.metadata.annotations.update({f"k{i}": "v" for i in range(MAX_MAP_ENTRIES + 1)})
    validate_object("projects", project)


def _long(n: int) -> str:
    return "x" * n


def _set_name(name: str) -> Mutation:
    return lambda obj: setattr(obj.metadata, "name", name)


# (mutation of valid_project(), field path, part of the message)
PROJECT_CASES: list[tuple[Mutation, str, str]] = [
    # type meta and metadata
    (lambda p: setattr(p, "api_version", "v1"), "apiVersion", 'must be "caravanserai/v1", not "v1"'),
    (lambda p: setattr(p, "kind", "Node"), "kind", 'must be "Project", not "Node"'),
    (_set_name(""), "metadata.name", "is required"),
    (
        _set_name("Shop"),
        "metadata.name",
        "must be a lowercase DNS label (a-z, 0-9, '-'), at most 63 characters, "
        "starting and ending with a letter or digit",
    ),
    (_set_name("shop.example"), "metadata.name", "must be a lowercase DNS label"),
    (_set_name(_long(64)), "metadata.name", "must be a lowercase DNS label"),
    (lambda p: p.metadata.labels.update({"Bad Key": "x"}), 'metadata.labels["Bad Key"]', "invalid key: name part"),
    (lambda p: p.metadata.labels.update({"ok": "-bad"}), 'metadata.labels["ok"]', "label value '-bad' must be"),
    (
        lambda p: p.metadata.annotations.update({"a/b/c": "x"}),
        'metadata.annotations["a/b/c"]',
        "invalid key: must contain at most one '/'",
    ),
    (
        lambda p: p.metadata.annotations.update({f"k{i}": _long(60_000) for i in range(5)}),
        "metadata.annotations",
        "must total at most 262144 bytes (256 KiB)",
    ),
    (lambda p: p.metadata.finalizers.append("not a name"), "metadata.finalizers[1]", "must be a qualified name"),
    # services
    (
        lambda p: (p.spec.ClearField("services"), p.spec.ClearField("ingress")),
        "spec.services",
        "at least one service is required",
    ),
    (lambda p: setattr(p.spec.services[1], "name", ""), "spec.services[1].name", "is required"),
    (lambda p: setattr(p.spec.services[1], "name", "DB_1"), "spec.services[1].name", "must be a lowercase DNS label"),
    (
        lambda p: setattr(p.spec.services[1], "name", "web"),
        "spec.services[1].name",
        'duplicate service name "web" (first at spec.services[0].name)',
    ),
    (lambda p: setattr(p.spec.services[0], "image", ""), "spec.services[0].image", "is required"),
    (
        lambda p: setattr(p.spec.services[0], "image", "nginx latest"),
        "spec.services[0].image",
        'must not contain whitespace, not "nginx latest"',
    ),
    (
        lambda p: setattr(p.spec.services[0], "image", "a " + _long(100)),
        "spec.services[0].image",
        f'must not contain whitespace, not "a {_long(62)}…"',
    ),
    (lambda p: p.spec.services[0].env.add(value="x"), "spec.services[0].env[2].name", "is required"),
    (lambda p: p.spec.services[0].env.add(name="A=B"), "spec.services[0].env[2].name", "must not contain '='"),
    (
        lambda p: p.spec.services[0].env.add(name="MODE"),
        "spec.services[0].env[2].name",
        'duplicate environment variable "MODE" (first at spec.services[0].env[0].name)',
    ),
    # ports
    (
        lambda p: setattr(p.spec.services[0].ports[0], "container_port", 0),
        "spec.services[0].ports[0].containerPort",
        "must be between 1 and 65535, not 0",
    ),
    (
        lambda p: setattr(p.spec.services[0].ports[0], "container_port", 65536),
        "spec.services[0].ports[0].containerPort",
        "must be between 1 and 65535, not 65536",
    ),
    (
        lambda p: setattr(p.spec.services[0].ports[2], "host_port", -1),
        "spec.services[0].ports[2].hostPort",
        "must be between 0 and 65535, not -1",
    ),
    (
        lambda p: setattr(p.spec.services[0].ports[2], "host_port", 70000),
        "spec.services[0].ports[2].hostPort",
        "must be between 0 and 65535",
    ),
    (
        lambda p: setattr(p.spec.services[0].ports[0], "protocol", "SCTP"),
        "spec.services[0].ports[0].protocol",
        'must be one of "TCP", "UDP" (or empty for TCP), not "SCTP"',
    ),
    (
        lambda p: p.spec.services[1].ports.add(container_port=1, host_port=80, protocol="TCP"),
        "spec.services[1].ports[1].hostPort",
        'duplicate host port "80/TCP" (first at spec.services[0].ports[0].hostPort)',
    ),
    (
        lambda p: setattr(p.spec.services[0].ports[2], "host_ip", "localhost"),
        "spec.services[0].ports[2].hostIp",
        'must be an IPv4 or IPv6 address, not "localhost"',
    ),
    (
        lambda p: setattr(p.spec.services[0].ports[0], "name", "HTTP"),
        "spec.services[0].ports[0].name",
        "must be a lowercase DNS label",
    ),
    (
        lambda p: setattr(p.spec.services[0].ports[1], "name", "http"),
        "spec.services[0].ports[1].name",
        'duplicate port name "http"',
    ),
    # volumes and mounts
    (lambda p: setattr(p.spec.volumes[1], "name", ""), "spec.volumes[1].name", "is required"),
    (lambda p: setattr(p.spec.volumes[1], "name", "Tmp"), "spec.volumes[1].name", "must be a lowercase DNS label"),
    (
        lambda p: setattr(p.spec.volumes[1], "name", "data"),
        "spec.volumes[1].name",
        'duplicate volume name "data" (first at spec.volumes[0].name)',
    ),
    (
        lambda p: setattr(p.spec.volumes[0], "type", "Host"),
        "spec.volumes[0].type",
        'must be one of "Ephemeral", "Persistent", "Secret", "Config", "HostPath" (or empty for Ephemeral), not "Host"',
    ),
    (
        lambda p: setattr(p.spec.services[1].volume_mounts[0], "name", "cache"),
        "spec.services[1].volumeMounts[0].name",
        'volume "cache" is not declared in spec.volumes',
    ),
    (
        lambda p: setattr(p.spec.services[1].volume_mounts[0], "name", ""),
        "spec.services[1].volumeMounts[0].name",
        "is required",
    ),
    (
        lambda p: setattr(p.spec.services[0].volume_mounts[0], "mount_path", "data"),
        "spec.services[0].volumeMounts[0].mountPath",
        "must be an absolute path (starting with '/'), not \"data\"",
    ),
    (
        lambda p: setattr(p.spec.services[0].volume_mounts[0], "mount_path", ""),
        "spec.services[0].volumeMounts[0].mountPath",
        "is required",
    ),
    (
        lambda p: p.spec.services[0].volume_mounts.add(name="tmp", mount_path="/data"),
        "spec.services[0].volumeMounts[1].mountPath",
        'duplicate mount path "/data"',
    ),
    (
        lambda p: setattr(p.spec.services[0], "working_dir", "srv"),
        "spec.services[0].workingDir",
        "must be an absolute path",
    ),
    # resources
    (
        lambda p: p.spec.services[0].resources.requests.update({"cpu": "lots"}),
        'spec.services[0].resources.requests["cpu"]',
        "invalid quantity 'lots'",
    ),
    (
        lambda p: p.spec.services[0].resources.requests.update({"cpu": "-1"}),
        'spec.services[0].resources.requests["cpu"]',
        'must not be negative, not "-1"',
    ),
    (
        lambda p: p.spec.services[1].resources.limits.update({"memory": "-1Gi"}),
        'spec.services[1].resources.limits["memory"]',
        "must not be negative",
    ),
    (
        lambda p: p.spec.services[0].resources.requests.update({"Bad Name": "1"}),
        'spec.services[0].resources.requests["Bad Name"]',
        "invalid resource name",
    ),
    (
        lambda p: p.spec.services[0].resources.limits.update({"cpu": "250m"}),
        'spec.services[0].resources.limits["cpu"]',
        "must not be below the request: limit 250m < request 500m",
    ),
    (
        lambda p: setattr(p.spec.services[0], "restart_policy", "Sometimes"),
        "spec.services[0].restartPolicy",
        'must be one of "Always", "OnFailure", "Never" (or empty for Always), not "Sometimes"',
    ),
    # ingress
    (lambda p: setattr(p.spec.ingress[1], "name", ""), "spec.ingress[1].name", "is required"),
    (lambda p: setattr(p.spec.ingress[1], "name", "www"), "spec.ingress[1].name", 'duplicate ingress name "www"'),
    (
        lambda p: setattr(p.spec.ingress[0].target, "service", "api"),
        "spec.ingress[0].target.service",
        'service "api" is not declared in spec.services',
    ),
    (lambda p: setattr(p.spec.ingress[0].target, "service", ""), "spec.ingress[0].target.service", "is required"),
    (
        lambda p: setattr(p.spec.ingress[0].target, "port", 0),
        "spec.ingress[0].target.port",
        "must be between 1 and 65535, not 0",
    ),
    (
        lambda p: setattr(p.spec.ingress[0].access, "scope", "World"),
        "spec.ingress[0].access.scope",
        'must be one of "Internal", "Public" (or empty for Internal), not "World"',
    ),
    (
        lambda p: setattr(p.spec.ingress[0], "host", "Shop.example.com"),
        "spec.ingress[0].host",
        "must be a lowercase DNS subdomain",
    ),
    # placement
    (lambda p: p.spec.node_selector.update({"bad key": "x"}), 'spec.nodeSelector["bad key"]', "invalid key"),
    (
        lambda p: p.spec.node_selector.update({"disk": "ssd nvme"}),
        'spec.nodeSelector["disk"]',
        "label value 'ssd nvme' must be",
    ),
    (
        lambda p: setattr(p.spec.tolerations[0], "operator", "In"),
        "spec.tolerations[0].operator",
        'must be one of "Equal", "Exists" (or empty for Equal), not "In"',
    ),
    (
        lambda p: setattr(p.spec.tolerations[1], "value", "x"),
        "spec.tolerations[1].value",
        'must be empty when operator is "Exists"',
    ),
    (
        lambda p: setattr(p.spec.tolerations[0], "effect", "NoRun"),
        "spec.tolerations[0].effect",
        'must be one of "NoSchedule", "PreferNoSchedule", "NoExecute" (or empty for every effect), not "NoRun"',
    ),
    (
        lambda p: setattr(p.spec.tolerations[0], "key", ""),
        "spec.tolerations[0].key",
        'is required unless operator is "Exists"',
    ),
    (lambda p: setattr(p.spec.tolerations[0], "key", "-x"), "spec.tolerations[0].key", "invalid key"),
    (lambda p: setattr(p.spec.tolerations[0], "value", "a b"), "spec.tolerations[0].value", "label value 'a b'"),
    (lambda p: setattr(p.spec.expire_at, "nanos", -1), "spec.expireAt", "must be a valid time between years 1"),
    (lambda p: setattr(p.spec.expire_at, "seconds", 253_402_300_800), "spec.expireAt", "must be a valid time"),
    # limits against abuse
    (
        lambda p: setattr(p.spec.services[0], "image", _long(MAX_STRING_BYTES + 1)),
        "spec.services[0].image",
        "value must be at most 65536 bytes (64 KiB), not 65537",
    ),
    (
        lambda p: p.spec.services[0].args.append("é" * (MAX_STRING_BYTES // 2 + 1)),
        "spec.services[0].args[2]",
        "must be at most 65536 bytes",
    ),
    (
        lambda p: p.spec.services[0].env.add(name="BIG", value=_long(MAX_STRING_BYTES + 1)),
        "spec.services[0].env[2].value",
        "must be at most 65536 bytes",
    ),
    (
        lambda p: p.metadata.labels.update({f"k{i}": "v" for i in range(MAX_MAP_ENTRIES)}),
        "metadata.labels",
        f"must have at most {MAX_MAP_ENTRIES} entries, not {MAX_MAP_ENTRIES + 3}",
    ),
    (
        lambda p: p.spec.node_selector.update({f"k{i}": "v" for i in range(MAX_MAP_ENTRIES)}),
        "spec.nodeSelector",
        "must have at most 256 entries",
    ),
    (
        lambda p: p.spec.services.extend(v1.Service(name=f"s{i}", image="x") for i in range(MAX_ITEMS)),
        "spec.services",
        f"must have at most {MAX_ITEMS} entries, not {MAX_ITEMS + 2}",
    ),
    (
        lambda p: p.spec.services[1].ports.extend(v1.ServicePort(container_port=1) for _ in range(MAX_ITEMS + 1)),
        "spec.services[1].ports",
        "must have at most 1000 entries",
    ),
    (
        lambda p: p.spec.services[1].env.extend(v1.EnvVar(name=f"V{i}") for i in range(MAX_ITEMS + 1)),
        "spec.services[1].env",
        "must have at most 1000 entries",
    ),
    (
        lambda p: p.spec.services[0].env.add(name=_long(MAX_STRING_BYTES + 1)),
        "spec.services[0].env[2].name",
        "must be at most 65536 bytes",
    ),
]

NODE_CASES: list[tuple[Mutation, str, str]] = [
    (_set_name("Node_1"), "metadata.name", "must be a lowercase DNS subdomain (a-z, 0-9, '-', '.'), at most 253"),
    (_set_name(".".join([_long(60)] * 5)), "metadata.name", "must be a lowercase DNS subdomain"),
    (_set_name(""), "metadata.name", "is required"),
    (lambda n: setattr(n, "kind", "Project"), "kind", 'must be "Node", not "Project"'),
    (lambda n: setattr(n.spec.taints[0], "key", ""), "spec.taints[0].key", "is required"),
    (lambda n: setattr(n.spec.taints[0], "key", "bad key"), "spec.taints[0].key", "invalid key"),
    (lambda n: setattr(n.spec.taints[0], "value", "-x"), "spec.taints[0].value", "label value '-x'"),
    (lambda n: setattr(n.spec.taints[0], "effect", ""), "spec.taints[0].effect", "is required"),
    (
        lambda n: setattr(n.spec.taints[0], "effect", "Evict"),
        "spec.taints[0].effect",
        'must be one of "NoSchedule", "PreferNoSchedule", "NoExecute", not "Evict"',
    ),
    (
        lambda n: n.spec.taints.add(key="dedicated", value="other", effect="NoSchedule"),
        "spec.taints[2]",
        'duplicate taint "dedicated:NoSchedule" (first at spec.taints[0])',
    ),
]

LEASE_CASES: list[tuple[Mutation, str, str]] = [
    (_set_name("Node 1"), "metadata.name", "must be a lowercase DNS subdomain"),
    (
        lambda lease: setattr(lease.spec, "lease_duration_seconds", -1),
        "spec.leaseDurationSeconds",
        "must not be negative, not -1",
    ),
    (
        lambda lease: setattr(lease.spec, "lease_duration_seconds", 0),
        "spec.leaseDurationSeconds",
        "must be at least 1 while holderIdentity is set, not 0",
    ),
    (lambda lease: setattr(lease.spec, "lease_transitions", -2), "spec.leaseTransitions", "must not be negative"),
]

EVENT_CASES: list[tuple[Mutation, str, str]] = [
    (_set_name("shop/17a3f"), "metadata.name", "must be a lowercase DNS subdomain"),
    (lambda e: setattr(e.spec.involved_object, "kind", ""), "spec.involvedObject.kind", "is required"),
    (lambda e: setattr(e.spec.involved_object, "name", ""), "spec.involvedObject.name", "is required"),
    (lambda e: setattr(e.spec, "type", ""), "spec.type", "is required"),
    (lambda e: setattr(e.spec, "type", "Error"), "spec.type", 'must be one of "Normal", "Warning", not "Error"'),
    (lambda e: setattr(e.spec, "reason", ""), "spec.reason", "is required"),
    (lambda e: setattr(e.spec, "count", -1), "spec.count", "must not be negative"),
    (lambda e: setattr(e.spec, "message", _long(MAX_STRING_BYTES + 1)), "spec.message", "must be at most 65536"),
]


def _rejects(check: Callable[[str, Any], None], resource: str, obj: Any, path: str, message: str) -> None:
    with pytest.raises(Invalid) as info:
        check(resource, obj)
    violations = [(v.field, v.description) for v in info.value.violations]
    assert [field for field, _ in violations] == [path], violations
    assert message in violations[0][1]
    assert f"{path}: " in str(info.value)


def _params(cases: list[tuple[Mutation, str, str]]) -> list[Any]:
    return [pytest.param(mutate, path, message, id=f"{path}: {message[:40]}") for mutate, path, message in cases]


@pytest.mark.parametrize(("mutate", "path", "message"), _params(PROJECT_CASES))
def test_project_rules(mutate: Mutation, path: str, message: str) -> None:
    project = valid_project()
    mutate(project)
    _rejects(validate_object, "projects", project, path, message)


@pytest.mark.parametrize(
    ("resource", "make", "mutate", "path", "message"),
    [pytest.param("nodes", valid_node, *p.values, id=p.id) for p in _params(NODE_CASES)]
    + [pytest.param("leases", valid_lease, *p.values, id=p.id) for p in _params(LEASE_CASES)]
    + [pytest.param("events", valid_event, *p.values, id=p.id) for p in _params(EVENT_CASES)],
)
def test_other_kinds(resource: str, make: Callable[[], Any], mutate: Mutation, path: str, message: str) -> None:
    obj = make()
    mutate(obj)
    _rejects(validate_object, resource, obj, path, message)


PROJECT_STATUS_CASES: list[tuple[Mutation, str, str]] = [
    (lambda p: setattr(p.status, "phase", ""), "status.phase", "is required"),
    (
        lambda p: setattr(p.status, "phase", "Done"),
        "status.phase",
        'must be one of "Queued", "Pending", "Scheduled", "Running", "Succeeded", "Failed", "Terminating",'
        ' "Terminated", not "Done"',
    ),
    (lambda p: setattr(p.status, "node_ref", "Node 1"), "status.nodeRef", "must be a lowercase DNS subdomain"),
    (lambda p: setattr(p.status.conditions[0], "type", ""), "status.conditions[0].type", "is required"),
    (
        lambda p: setattr(p.status.conditions[1], "type", "Scheduled"),
        "status.conditions[1].type",
        'duplicate condition type "Scheduled" (first at status.conditions[0].type)',
    ),
    (
        lambda p: setattr(p.status.conditions[0], "status", "true"),
        "status.conditions[0].status",
        'must be one of "True", "False", "Unknown", not "true"',
    ),
    (lambda p: setattr(p.status.conditions[0], "status", ""), "status.conditions[0].status", "is required"),
    (lambda p: setattr(p.status.services[1], "name", ""), "status.services[1].name", "is required"),
    (lambda p: setattr(p.status.services[1], "name", "web"), "status.services[1].name", 'duplicate service name "web"'),
    (
        lambda p: setattr(p.status.services[1], "restart_count", -1),
        "status.services[1].restartCount",
        "must not be negative",
    ),
    (lambda p: setattr(p.status, "observed_generation", -1), "status.observedGeneration", "must not be negative"),
    (
        lambda p: setattr(p.status.services[0], "message", _long(MAX_STRING_BYTES + 1)),
        "status.services[0].message",
        "must be at most 65536 bytes",
    ),
    (
        lambda p: setattr(p.status.conditions[0].last_transition_time, "seconds", -62_135_596_801),
        "status.conditions[0].lastTransitionTime",
        "must be a valid time",
    ),
]

NODE_STATUS_CASES: list[tuple[Mutation, str, str]] = [
    (
        lambda n: setattr(n.status, "state", "Draining"),
        "status.state",
        'must be one of "Ready", "NotReady" (or empty while unknown), not "Draining"',
    ),
    (lambda n: setattr(n.status.conditions[1], "status", "Yes"), "status.conditions[1].status", "must be one of"),
    (lambda n: setattr(n.status.conditions[1], "type", ""), "status.conditions[1].type", "is required"),
    (lambda n: n.status.capacity.update({"memory": "16 GB"}), 'status.capacity["memory"]', "invalid quantity"),
    (lambda n: n.status.allocatable.update({"cpu": "-1"}), 'status.allocatable["cpu"]', "must not be negative"),
    (lambda n: n.status.allocatable.update({"a b": "1"}), 'status.allocatable["a b"]', "invalid resource name"),
    (
        lambda n: n.status.capacity.update({f"r{i}": "1" for i in range(MAX_MAP_ENTRIES)}),
        "status.capacity",
        "must have at most 256 entries",
    ),
    (
        lambda n: setattr(n.status.network.addresses[0], "type", "Public"),
        "status.network.addresses[0].type",
        'must be one of "InternalIP", "ExternalIP", "Hostname", not "Public"',
    ),
    (
        lambda n: setattr(n.status.network.addresses[0], "address", ""),
        "status.network.addresses[0].address",
        "is required",
    ),
    (
        lambda n: setattr(n.status.network, "agent_port", 65536),
        "status.network.agentPort",
        "must be between 0 and 65535",
    ),
    (
        lambda n: setattr(n.status.network.throughput, "upload", "fast"),
        "status.network.throughput.upload",
        "invalid quantity 'fast'",
    ),
]


@pytest.mark.parametrize(
    ("resource", "make", "mutate", "path", "message"),
    [pytest.param("projects", project_status, *p.values, id=p.id) for p in _params(PROJECT_STATUS_CASES)]
    + [pytest.param("nodes", node_status, *p.values, id=p.id) for p in _params(NODE_STATUS_CASES)],
)
def test_status_rules(resource: str, make: Callable[[], Any], mutate: Mutation, path: str, message: str) -> None:
    obj = make()
    mutate(obj)
    _rejects(validate_status, resource, obj, path, message)


def test_all_violations_are_reported_at_once() -> None:
    project = valid_project()
    project.metadata.name = "Bad"
    project.spec.services[0].image = ""
    project.spec.volumes[0].type = "Host"
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    assert [v.field for v in info.value.violations] == [
        "metadata.name",
        "spec.volumes[0].type",
        "spec.services[0].image",
    ]
    assert str(info.value).startswith('invalid project "Bad": metadata.name: must be a lowercase DNS label')


def test_violations_are_capped() -> None:
    project = valid_project()
    project.spec.services[1].env.extend(v1.EnvVar(name="") for _ in range(MAX_VIOLATIONS + 5))
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    assert len(info.value.violations) == MAX_VIOLATIONS + 1
    assert info.value.violations[-1].description == "5 further violations"


def test_validate_object_ignores_status_and_validate_status_ignores_spec() -> None:
    project = valid_project()
    project.status.phase = "Bogus"
    validate_object("projects", project)
    status_only = v1.Project(status=v1.ProjectStatus(phase="Pending"))
    validate_status("projects", status_only)


def test_unknown_resource_and_wrong_class() -> None:
    with pytest.raises(
        Invalid,
        match='unknown resource "pods"; known: admissionpolicies, backuprepositories, clusterrolebindings, '
        "clusterroles, configs, events, leases, namespaces, nodegroups, nodes, projects, projectsets, "
        "resourcedefinitions, resourcequotas, rolebindings, roles, routes, secrets",
    ):
        validate_object("pods", v1.Project())
    with pytest.raises(TypeError, match="projects holds Project objects, not Node"):
        validate_status("projects", v1.Node())


def test_long_map_keys_are_shortened_in_paths() -> None:
    project = valid_project()
    project.metadata.annotations[_long(MAX_STRING_BYTES + 1)] = ""
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    fields = {v.field for v in info.value.violations}
    assert fields == {f'metadata.annotations["{_long(64)}…"]'}
    assert any(v.description == "key must be at most 65536 bytes (64 KiB), not 65537" for v in info.value.violations)
    assert len(str(info.value)) < 1000


def test_map_values_are_size_limited_too() -> None:
    project = valid_project()
    project.spec.node_selector["disk"] = _long(MAX_STRING_BYTES + 1)
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    assert [v.field for v in info.value.violations] == ['spec.nodeSelector["disk"]'] * 2
    assert info.value.violations[1].description == "value must be at most 65536 bytes (64 KiB), not 65537"


@pytest.mark.parametrize("policy", ["", "PreemptLowerPriority", "Never"])
def test_preemption_policies_pass(policy: str) -> None:
    project = valid_project()
    project.spec.preemption_policy = policy
    validate_object("projects", project)


def test_an_unknown_preemption_policy_is_refused_with_its_field_path() -> None:
    project = valid_project()
    project.spec.preemption_policy = "Always"
    _rejects(
        validate_object,
        "projects",
        project,
        "spec.preemptionPolicy",
        'must be one of "PreemptLowerPriority", "Never" (or empty for PreemptLowerPriority), not "Always"',
    )
