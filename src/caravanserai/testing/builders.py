"""Object builders for tests: short calls that produce valid objects."""

from __future__ import annotations

from collections.abc import Mapping

from caravanserai import meta, v1


def project(
    name: str,
    *,
    image: str = "busybox:test",
    services: int | list[str] = 1,
    command: list[str] | None = None,
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    priority: int = 0,
    namespace: str = "",
) -> v1.Project:
    """A valid project with one or more services running `command` (default: sleep forever), in `namespace`
    ("": none named; a client puts it in its own namespace, `default` unless told otherwise)."""
    names = [f"svc{i}" for i in range(services)] if isinstance(services, int) else list(services)
    obj = meta.with_type_meta(v1.Project())
    obj.metadata.name = name
    obj.metadata.namespace = namespace
    obj.metadata.labels.update(labels or {})
    for service_name in names:
        svc = obj.spec.services.add()
        svc.name = service_name
        svc.image = image
        svc.command.extend(command if command is not None else ["sleep", "3600"])
        if requests:
            svc.resources.requests.update(requests)
    obj.spec.node_selector.update(node_selector or {})
    obj.spec.priority = priority
    return obj


def node(name: str, *, labels: Mapping[str, str] | None = None, unschedulable: bool = False) -> v1.Node:
    """A node object as an administrator or agent would create it (status is set separately)."""
    obj = meta.with_type_meta(v1.Node())
    obj.metadata.name = name
    obj.metadata.labels.update(labels or {})
    obj.spec.hostname = name
    obj.spec.unschedulable = unschedulable
    return obj


def node_status(
    obj: v1.Node,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    state: str = v1.NODE_READY,
    extra: Mapping[str, str] | None = None,
) -> v1.Node:
    """Set capacity and allocatable (equal) and the state on `obj` in place; returns it."""
    resources = {"cpu": cpu, "memory": memory, **(extra or {})}
    obj.status.capacity.clear()
    obj.status.capacity.update(resources)
    obj.status.allocatable.clear()
    obj.status.allocatable.update(resources)
    obj.status.state = state
    return obj


def lease(name: str, *, holder: str = "", duration: int = 40) -> v1.Lease:
    obj = meta.with_type_meta(v1.Lease())
    obj.metadata.name = name
    obj.spec.holder_identity = holder or name
    obj.spec.lease_duration_seconds = duration
    return obj


__all__ = ["lease", "node", "node_status", "project"]
