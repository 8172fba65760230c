"""`caractrl describe project NAME`: every field of a project, the reason for its state first.

For a Pending project the scheduler's verdict is the first thing a user needs, so `Reason:` and `Message:`
(from the Scheduled=False condition, else the Phase condition) sit right under the phase.
"""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai import meta, v1
from caravanserai.cli.describe_run import run_option_fields
from caravanserai.cli.describe_volumes import move_text, write_placement, write_volumes
from caravanserai.cli.layout import Writer, listing, metadata_fields, quantities, write_conditions, write_events
from caravanserai.cli.printers import NONE, key_values, or_none
from caravanserai.cli.tables import project_reason, services_ready
from caravanserai.client.agentlogs import node_address
from caravanserai.clock import rfc3339
from caravanserai.project import grants
from caravanserai.project.affinity import placement_of
from caravanserai.project.decisions import placement_lines, scores_text
from caravanserai.project.ingresshosts import INTERNAL, ingress_host

SERVICE_STATUS_HEADERS = (
    "NAME",
    "STATE",
    "READY",
    "HEALTH",
    "RESTARTS",
    "EXIT CODE",
    "LAST EXIT",
    "CONTAINER",
    "IMAGE",
    "GENERATION",
    "WAITING FOR",
    "MESSAGE",
)


def _header(project: v1.Project, now: float) -> list[tuple[str, str]]:
    status = project.status
    pairs = [("Name", project.metadata.name), ("Kind", "Project"), ("Phase", or_none(status.phase, "<unknown>"))]
    cond = project_reason(project)
    if cond is not None and (status.phase != v1.RUNNING or cond.status == v1.FALSE):
        pairs += [("Reason", or_none(cond.reason)), ("Message", or_none(cond.message))]
    deletion = deletion_outlook(project)
    if deletion:
        pairs.append(("Deletion", deletion))
    pairs += [
        ("Node", or_none(status.node_ref)),
        ("Ready", f"{services_ready(project)} services"),
        ("Observed Generation", str(status.observed_generation)),
        ("Bound Generation", str(status.scheduled_generation)),
    ]
    if status.HasField("handoff_deadline"):
        deadline = rfc3339(status.handoff_deadline)
        pairs.append(
            (
                "Handoff",
                f"old containers on {or_none(status.previous_node_ref)} until it runs, at most until {deadline}",
            )
        )
    elif status.previous_node_ref:
        pairs.append(("Handoff", f"moved off {status.previous_node_ref} (final backups handed over)"))
    if status.HasField("move"):
        pairs.append(("Move", move_text(status.move, now)))
    if status.nominated_node_name:
        pairs.append(("Nominated Node", f"{status.nominated_node_name} (room kept there while its victims leave)"))
    preempted = meta.get_condition(status.conditions, v1.CONDITION_PREEMPTED)
    if preempted is not None and preempted.status == v1.TRUE:
        pairs.append(("Preempted", f"{preempted.message} ({rfc3339(preempted.last_transition_time)})"))
    return pairs


def deletion_outlook(project: v1.Project) -> str:
    """What happens to a project whose deletion was requested ("" when it was not)."""
    if not project.metadata.HasField("deletion_timestamp"):
        return ""
    phase = project.status.phase
    finalizers = ", ".join(project.metadata.finalizers)
    if phase == v1.TERMINATING:
        after = f" and its finalizers are removed ({finalizers})" if finalizers else ""
        return f"the agent removes the containers; the record is removed once it is Terminated{after}"
    if phase == v1.PENDING:
        return (
            f"requested; the project stays Pending and is not scheduled until its finalizers are removed "
            f"({finalizers}), then its record is removed"
        )
    return f"requested; the record is removed when its finalizers are removed ({finalizers})"


def _port(port: v1.ServicePort) -> str:
    text = f"{port.container_port}/{port.protocol or 'TCP'}"
    if port.host_port:
        text += f" -> {port.host_ip or '0.0.0.0'}:{port.host_port}"
    elif port.host_ip:
        text += f" (host ip {port.host_ip})"
    return f"{text} ({port.name})" if port.name else text


def _service(out: Writer, service: v1.Service) -> None:
    out.heading(service.name or NONE, 2)
    out.fields(
        [
            ("Image", or_none(service.image)),
            ("Command", " ".join(service.command) or NONE),
            ("Args", " ".join(service.args) or NONE),
            ("Working Dir", or_none(service.working_dir)),
            ("Restart Policy", service.restart_policy or "Always (default)"),
            ("Depends On", listing(f"{d.service} ({d.condition or 'started'})" for d in service.depends_on)),
            ("Healthcheck", healthcheck_text(service.healthcheck) if service.HasField("healthcheck") else NONE),
            ("Restarted At", rfc3339(service.restarted_at) if service.HasField("restarted_at") else NONE),
            ("Pull Policy", service.image_pull_policy or "IfNotPresent (default)"),
            ("Env", listing(_env(e) for e in service.env)),
            ("Env From", listing(_source(s.secret, s.config) for s in service.env_from)),
            ("Ports", listing(_port(p) for p in service.ports)),
            (
                "Volume Mounts",
                listing(
                    f"{m.name} -> {m.mount_path}{' (read-only)' if m.read_only else ''}" for m in service.volume_mounts
                ),
            ),
            ("Requests", quantities(service.resources.requests)),
            ("Limits", quantities(service.resources.limits)),
            ("Granted", _granted(service)),
            *run_option_fields(service),
        ],
        3,
    )


def _source(secret: str, config: str) -> str:
    return ", ".join([f"secret {secret}"] * bool(secret) + [f"config {config}"] * bool(config)) or NONE


def _env(env: v1.EnvVar) -> str:
    """`NAME=value`, or `NAME from secret S key K` (never the secret's value: describe does not read it)."""
    if env.HasField("value_from"):
        ref = env.value_from
        literal = f" (and value {env.value})" if env.value else ""
        return f"{env.name} from {_source(ref.secret, ref.config)} key {ref.key}{literal}"
    return f"{env.name}={env.value}"


def _granted(service: v1.Service) -> str:
    """What the container is told it was granted (`caravanserai.project.grants`), e.g. `CARA_CPU_REQUEST=500, …`."""
    try:
        return key_values(grants.resource_variables(service), sep=", ")
    except ValueError as exc:  # a quantity the apiserver would refuse
        return f"<{exc}>"


def _volume(volume: v1.Volume) -> list[str]:
    named = (("host path", volume.host_path), ("secret", volume.secret), ("config", volume.config))
    source = ", ".join(f"{what} {name}" for what, name in named if name) or NONE
    mode = f"0o{volume.mode:o}" if volume.mode else ("0o444" if volume.secret or volume.config else NONE)
    return [volume.name, volume.type or "Ephemeral", source, mode]


def healthcheck_text(check: v1.HealthCheck) -> str:
    """One line, e.g. `http GET :8080/healthz (200-399) every 10s, timeout 5s, 3 retries, start period 0s`."""
    probes = []
    if check.HasField("exec"):
        probes.append("exec " + " ".join(check.exec.command))
    if check.HasField("http"):
        probes.append(
            f"http GET :{check.http.port}{check.http.path or '/'} ({check.http.expected_status or '200-399'})"
        )
    if check.HasField("tcp"):
        probes.append(f"tcp :{check.tcp.port}")
    probe = ", ".join(probes) or "<no probe>"
    return (
        f"{probe} every {check.interval or '10s'}, timeout {check.timeout or '5s'}, {check.retries or 3} retries, "
        f"start period {check.start_period or '0s'}"
    )


def _toleration(t: v1.Toleration) -> str:
    operator = t.operator or "Equal"
    match = f"{t.key or '*'}" + (f"={t.value}" if t.value else "")
    text = f"{match}:{t.effect or '*'} ({operator})"
    return text + (f" for {t.toleration_seconds}s" if t.HasField("toleration_seconds") else "")


def _spec(out: Writer, spec: v1.ProjectSpec) -> None:
    out.heading("Spec")
    out.fields(
        [
            ("Priority", str(spec.priority)),
            ("Preemption Policy", spec.preemption_policy or v1.PREEMPT_LOWER_PRIORITY),
            ("Update Order", spec.update.order or v1.UPDATE_STOP_FIRST),
            ("Node Selector", quantities(spec.node_selector)),
            ("Tolerations", listing(_toleration(t) for t in spec.tolerations)),
            ("Expire At", rfc3339(spec.expire_at) if spec.HasField("expire_at") else NONE),
            ("Image Pull Secrets", ", ".join(spec.image_pull_secrets) or NONE),
            *placement_lines(placement_of(spec)),
        ],
        1,
    )
    out.heading("Services", 1)
    for service in spec.services:
        _service(out, service)
    out.heading("Volumes", 1)
    out.table(("NAME", "TYPE", "SOURCE", "MODE"), [_volume(v) for v in spec.volumes], 2)
    out.heading("Ingress", 1)
    rows = [
        [i.name, or_none(i.host), f"{i.target.service}:{i.target.port}", i.access.scope or "Internal"]
        for i in spec.ingress
    ]
    out.table(("NAME", "HOST", "TARGET", "SCOPE"), rows, 2)


def service_status_rows(services: Sequence[v1.ServiceStatus]) -> list[list[str]]:
    return [
        [
            s.name,
            or_none(s.state),
            "true" if s.ready else "false",
            or_none(s.health),
            str(s.restart_count),
            str(s.exit_code),
            str(s.last_exit_code),
            or_none(s.container_id[:12]),
            or_none(s.image),
            str(s.generation),
            or_none(s.waiting_for),
            or_none(s.message),
        ]
        for s in services
    ]


INGRESS_HEADERS = ("HOST", "TARGET", "SCOPE", "URL", "SERVED")


def ingress_rows(project: v1.Project, node: v1.Node | None) -> list[list[str]]:
    """One row per ingress: its host, target, scope, URL on the project's node and whether it is served there.
    Every node's ingress answers for every host, forwarding to the project's node."""
    port = node.status.network.ingress_port if node is not None else 0
    address = node_address(node) if node is not None else ""
    if project.status.phase != v1.RUNNING:
        served = f"no: the project is {project.status.phase or 'Pending'}"
    elif node is None:
        served = f"unknown: node {project.status.node_ref} not readable"
    elif not port:
        served = f"no: node {node.metadata.name} runs no ingress (any other node's ingress forwards)"
    else:
        served = f"yes, by node {node.metadata.name} ({address}:{port})"
    rows = []
    for ingress in project.spec.ingress:
        host = ingress_host(project, ingress)
        url = f"http://{host}:{port}/" if port else f"http://{host}/"
        target = f"{ingress.target.service}:{ingress.target.port}"
        rows.append([host, target, ingress.access.scope or INTERNAL, url, served])
    return rows


def describe_project(
    project: v1.Project, events: Sequence[v1.Event], now: float, *, node: v1.Node | None = None
) -> str:
    """The full description of `project`, with its `events`; `node` is the project's node (for its ingress)."""
    out = Writer()
    out.fields(_header(project, now) + metadata_fields(project, now))
    _spec(out, project.spec)
    write_conditions(out, project.status.conditions, now)
    out.heading("Service Status")
    out.table(SERVICE_STATUS_HEADERS, service_status_rows(project.status.services))
    write_volumes(out, project, now)
    if project.status.HasField("placement_scores"):
        out.fields([("Scheduling Decision", scores_text(project.status.placement_scores))])
    if project.status.HasField("placement"):
        write_placement(out, project.status.placement)
    if project.spec.ingress:
        out.heading("Ingress Routes")
        out.table(INGRESS_HEADERS, ingress_rows(project, node))
    write_events(out, events, now)
    return out.text()


__all__ = [
    "INGRESS_HEADERS",
    "SERVICE_STATUS_HEADERS",
    "deletion_outlook",
    "describe_project",
    "healthcheck_text",
    "ingress_rows",
    "service_status_rows",
]
