"""The rules of a project's spec and status (Create, Update, UpdateStatus), called by its strategy.

* spec: at least one service; names of volumes, services, ports, environment variables, mounts and ingress
  routes unique where they must be; images without whitespace; ports 1-65535 (host ports once per protocol);
  mounts of declared volumes at absolute paths; resource requests not above their limits, memory ones none below
  Docker's minimum (6Mi); ingress routes to a declared service; tolerations well-formed. How services relate
  (`dependsOn`, `healthcheck`, tolerationSeconds) is in `servicerules`; affinity and spread constraints in
  `affinityrules`; where a project names Secrets, Configs,
  host paths and extended resources in `datarules`; a volume's backups and restores in `backuprules`; how a
  container runs (user, capabilities, devices, tmpfs, network mode, ulimits, sysctls, logging …) in `runrules`;
  `update.order` a known order, start-first only without host ports or the host's network.
* status: a known phase, well-formed conditions, one entry per service and one per volume (each named).
"""

from __future__ import annotations

import ipaddress

from caravanserai import v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.project import affinityrules, backuprules, datarules, runrules, servicerules
from caravanserai.text.selectors import (
    validate_dns_label,
    validate_dns_subdomain,
    validate_label_key,
    validate_label_value,
)
from caravanserai.text.violations import Violations, key_path, quote

MIN_MEMORY_BYTES = 6 * 1024 * 1024
"""Docker refuses a container whose memory limit or reservation is below 6 MiB."""


def project_spec(errors: Violations, spec: v1.ProjectSpec) -> None:
    if not spec.services:
        errors.add("spec.services", "at least one service is required")
    volumes = {volume.name for volume in spec.volumes}
    for i, volume in enumerate(spec.volumes):
        if errors.required(f"spec.volumes[{i}].name", volume.name):
            errors.check(f"spec.volumes[{i}].name", validate_dns_label(volume.name))
        errors.choice(f"spec.volumes[{i}].type", volume.type, v1.VOLUME_TYPES, empty="for Ephemeral")
        datarules.volume_data(errors, f"spec.volumes[{i}]", volume)
        backuprules.volume_backups(errors, f"spec.volumes[{i}]", volume, spec)
    errors.unique(((f"spec.volumes[{i}].name", v.name) for i, v in enumerate(spec.volumes)), "volume name")
    for i, service in enumerate(spec.services):
        _service(errors, f"spec.services[{i}]", service, volumes)
    errors.unique(((f"spec.services[{i}].name", s.name) for i, s in enumerate(spec.services)), "service name")
    errors.unique(
        (
            (f"spec.services[{i}].ports[{j}].hostPort", f"{port.host_port}/{port.protocol or 'TCP'}")
            for i, service in enumerate(spec.services)
            for j, port in enumerate(service.ports)
            if port.host_port
        ),
        "host port",
    )
    services = {service.name for service in spec.services}
    for i, ingress in enumerate(spec.ingress):
        _ingress(errors, f"spec.ingress[{i}]", ingress, services)
    errors.unique(((f"spec.ingress[{i}].name", g.name) for i, g in enumerate(spec.ingress)), "ingress name")
    validation.labels(errors, "spec.nodeSelector", spec.node_selector)
    affinityrules.placement_rules(errors, spec)
    for i, toleration in enumerate(spec.tolerations):
        _toleration(errors, f"spec.tolerations[{i}]", toleration)
        servicerules.toleration_seconds(errors, f"spec.tolerations[{i}]", toleration)
    servicerules.dependencies(errors, spec)
    datarules.pull_secrets(errors, spec)
    errors.choice(
        "spec.preemptionPolicy",
        spec.preemption_policy,
        v1.PREEMPTION_POLICIES,
        empty=f"for {v1.PREEMPT_LOWER_PRIORITY}",
    )
    _update(errors, spec)


def _update(errors: Violations, spec: v1.ProjectSpec) -> None:
    """`spec.update.order`: a known order; start-first only when no service binds a port of the host (the new and
    the old container run side by side)."""
    order = spec.update.order
    errors.choice("spec.update.order", order, v1.UPDATE_ORDERS, empty=f"for {v1.UPDATE_STOP_FIRST}")
    if order != v1.UPDATE_START_FIRST:
        return
    for i, service in enumerate(spec.services):
        for j, port in enumerate(service.ports):
            if port.host_port:
                errors.add(
                    f"spec.services[{i}].ports[{j}].hostPort",
                    f"service {quote(service.name)} publishes host port {port.host_port}: spec.update.order "
                    "start-first runs two containers at once, which cannot bind the same port; use stop-first",
                )
        if service.network_mode == v1.NETWORK_MODE_HOST:
            errors.add(
                f"spec.services[{i}].networkMode",
                f"service {quote(service.name)} uses the host's network: spec.update.order start-first runs two "
                "containers at once, which cannot bind the same ports; use stop-first",
            )


def _service(errors: Violations, path: str, service: v1.Service, volumes: set[str]) -> None:
    if errors.required(f"{path}.name", service.name):
        errors.check(f"{path}.name", validate_dns_label(service.name))
    if errors.required(f"{path}.image", service.image) and any(c.isspace() for c in service.image):
        errors.add(f"{path}.image", f"must not contain whitespace, not {quote(service.image)}")
    for i, env in enumerate(service.env):
        if errors.required(f"{path}.env[{i}].name", env.name) and "=" in env.name:
            errors.add(f"{path}.env[{i}].name", f"must not contain '=', not {quote(env.name)}")
    errors.unique(((f"{path}.env[{i}].name", e.name) for i, e in enumerate(service.env)), "environment variable")
    for i, port in enumerate(service.ports):
        _port(errors, f"{path}.ports[{i}]", port)
    errors.unique(((f"{path}.ports[{i}].name", p.name) for i, p in enumerate(service.ports)), "port name")
    for i, mount in enumerate(service.volume_mounts):
        here = f"{path}.volumeMounts[{i}]"
        if errors.required(f"{here}.name", mount.name) and mount.name not in volumes:
            errors.add(f"{here}.name", f"volume {quote(mount.name)} is not declared in spec.volumes")
        if errors.required(f"{here}.mountPath", mount.mount_path):
            validation.absolute_path(errors, f"{here}.mountPath", mount.mount_path)
    mounts = ((f"{path}.volumeMounts[{i}].mountPath", m.mount_path) for i, m in enumerate(service.volume_mounts))
    errors.unique(mounts, "mount path")
    _resources(errors, f"{path}.resources", service.resources)
    errors.choice(f"{path}.restartPolicy", service.restart_policy, ("Always", "OnFailure", "Never"), empty="for Always")
    if service.working_dir:
        validation.absolute_path(errors, f"{path}.workingDir", service.working_dir)
    if service.HasField("healthcheck"):
        servicerules.healthcheck(errors, f"{path}.healthcheck", service.healthcheck)
    datarules.service_data(errors, path, service)
    runrules.run_options(errors, path, service)


def _port(errors: Violations, path: str, port: v1.ServicePort) -> None:
    errors.between(f"{path}.containerPort", port.container_port, 1, 65535)
    errors.between(f"{path}.hostPort", port.host_port, 0, 65535)
    errors.choice(f"{path}.protocol", port.protocol, ("TCP", "UDP"), empty="for TCP")
    if port.host_ip:
        try:
            ipaddress.ip_address(port.host_ip)
        except ValueError:
            errors.add(f"{path}.hostIp", f"must be an IPv4 or IPv6 address, not {quote(port.host_ip)}")
    if port.name:
        errors.check(f"{path}.name", validate_dns_label(port.name))


def _resources(errors: Violations, path: str, resources: v1.ResourceRequirements) -> None:
    requests = validation.quantities(errors, f"{path}.requests", resources.requests)
    limits = validation.quantities(errors, f"{path}.limits", resources.limits)
    for part, amounts, texts in (("requests", requests, resources.requests), ("limits", limits, resources.limits)):
        memory = amounts.get("memory")
        if memory is not None and 0 < memory < MIN_MEMORY_BYTES:
            errors.add(
                key_path(f"{path}.{part}", "memory"),
                f"must be at least 6Mi (Docker's minimum for a container), not {texts['memory']}",
            )
    for name, limit in limits.items():
        if name in requests and limit < requests[name]:
            errors.add(
                key_path(f"{path}.limits", name),
                f"must not be below the request: limit {resources.limits[name]} < request {resources.requests[name]}",
            )


def _ingress(errors: Violations, path: str, ingress: v1.Ingress, services: set[str]) -> None:
    errors.required(f"{path}.name", ingress.name)
    if ingress.host:
        errors.check(f"{path}.host", validate_dns_subdomain(ingress.host))
    target = ingress.target
    if errors.required(f"{path}.target.service", target.service) and target.service not in services:
        errors.add(f"{path}.target.service", f"service {quote(target.service)} is not declared in spec.services")
    errors.between(f"{path}.target.port", target.port, 1, 65535)
    errors.choice(f"{path}.access.scope", ingress.access.scope, ("Internal", "Public"), empty="for Internal")


def _toleration(errors: Violations, path: str, toleration: v1.Toleration) -> None:
    errors.choice(f"{path}.operator", toleration.operator, ("Equal", "Exists"), empty="for Equal")
    if toleration.key:
        errors.check(f"{path}.key", validate_label_key(toleration.key), prefix="invalid key: ")
    elif toleration.operator != "Exists":
        errors.add(f"{path}.key", 'is required unless operator is "Exists"')
    if toleration.operator == "Exists" and toleration.value:
        errors.add(f"{path}.value", 'must be empty when operator is "Exists"')
    errors.check(f"{path}.value", validate_label_value(toleration.value))
    errors.choice(f"{path}.effect", toleration.effect, validation.TAINT_EFFECTS, empty="for every effect")


def project_status(errors: Violations, status: v1.ProjectStatus) -> None:
    errors.choice("status.phase", status.phase, v1.PHASES)
    if status.node_ref:
        errors.check("status.nodeRef", validate_dns_subdomain(status.node_ref))
    validation.conditions(errors, "status.conditions", status.conditions)
    for i, service in enumerate(status.services):
        errors.required(f"status.services[{i}].name", service.name)
        errors.non_negative(f"status.services[{i}].restartCount", service.restart_count)
    errors.unique(((f"status.services[{i}].name", s.name) for i, s in enumerate(status.services)), "service name")
    for i, volume in enumerate(status.volumes):
        errors.required(f"status.volumes[{i}].name", volume.name)
    errors.unique(((f"status.volumes[{i}].name", v.name) for i, v in enumerate(status.volumes)), "volume name")
    errors.non_negative("status.observedGeneration", status.observed_generation)


__all__ = ["MIN_MEMORY_BYTES", "project_spec", "project_status"]
