"""What only an admin may put in a project's spec: whatever reaches the node itself rather than the project's own
container, network and volumes. Every other writer of project specs (today none: only admins write them, but team
roles will) is refused with the field path and who may (`ProjectStrategy.admin_only`, enforced by the authorizer):

* `services[i].privileged: true` (every capability and device of the node);
* `services[i].devices[j]` (a device of the node);
* `services[i].networkMode: host` (the node's network stack);
* `volumes[i]` of type HostPath (a directory of the node, bind-mounted).

The whole resulting spec is checked, not only what changed: a non-admin may not edit a project that keeps such a
field either (changing its image would run new code with the same reach).
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.errors import FieldViolation


def admin_only_fields(spec: v1.ProjectSpec) -> list[FieldViolation]:
    """Each field of `spec` that only an admin may set, with what it would allow."""
    found: list[FieldViolation] = []
    for i, service in enumerate(spec.services):
        path = f"spec.services[{i}]"
        if service.privileged:
            found.append(FieldViolation(f"{path}.privileged", "only an admin may run a privileged container"))
        for j, _ in enumerate(service.devices):
            found.append(FieldViolation(f"{path}.devices[{j}]", "only an admin may give a container a node's device"))
        if service.network_mode == v1.NETWORK_MODE_HOST:
            found.append(FieldViolation(f"{path}.networkMode", "only an admin may use the node's network (host)"))
    for i, volume in enumerate(spec.volumes):
        if volume.type == v1.VOLUME_HOST_PATH:
            found.append(FieldViolation(f"spec.volumes[{i}].type", "only an admin may mount a host path (HostPath)"))
    return found


__all__ = ["admin_only_fields"]
