"""Validation of how a project's services relate and are checked: `dependsOn` and `healthcheck`.

* `dependsOn[j].service` must name another service of the project; `condition` is started (default), healthy
  (the named service needs a healthcheck) or completed (the named service needs restart policy Never or
  OnFailure, else it never completes); one entry per service; cycles are refused at the entry that closes them.
* `healthcheck` has exactly one of exec (a non-empty command), http (port 1-65535, absolute path, a status
  code or range) and tcp (port); interval and timeout are positive durations, startPeriod a duration, retries
  not negative.
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.project import servicegraph
from caravanserai.text.durations import parse_duration
from caravanserai.text.violations import Violations, quote

_MAX_INTERVAL_SECONDS = 86_400.0


def dependencies(errors: Violations, spec: v1.ProjectSpec) -> None:
    """Check every service's dependsOn against the project's services, then look for a cycle."""
    by_name = {s.name: s for s in spec.services}
    for i, service in enumerate(spec.services):
        for j, dep in enumerate(service.depends_on):
            _dependency(errors, f"spec.services[{i}].dependsOn[{j}]", service, dep, by_name)
        entries = ((f"spec.services[{i}].dependsOn[{j}].service", d.service) for j, d in enumerate(service.depends_on))
        errors.unique(entries, "dependency")
    cycle = servicegraph.find_cycle(spec)
    if cycle:
        last = cycle[-1]
        i = next(k for k, s in enumerate(spec.services) if s.name == last)
        j = next(k for k, d in enumerate(spec.services[i].depends_on) if d.service == cycle[0])
        loop = " -> ".join([*cycle, cycle[0]])
        errors.add(f"spec.services[{i}].dependsOn[{j}].service", f"dependency cycle: {loop}")


def _dependency(
    errors: Violations, path: str, service: v1.Service, dep: v1.ServiceDependency, by_name: dict[str, v1.Service]
) -> None:
    errors.choice(f"{path}.condition", dep.condition, servicegraph.CONDITIONS, empty="for started")
    if not errors.required(f"{path}.service", dep.service):
        return
    if dep.service == service.name:
        errors.add(f"{path}.service", "a service cannot depend on itself")
        return
    target = by_name.get(dep.service)
    if target is None:
        errors.add(f"{path}.service", f"service {quote(dep.service)} is not declared in spec.services")
    elif dep.condition == servicegraph.HEALTHY and not target.HasField("healthcheck"):
        errors.add(f"{path}.condition", f"healthy needs a healthcheck on service {quote(dep.service)}")
    elif dep.condition == servicegraph.COMPLETED and target.restart_policy in ("", "Always"):
        errors.add(
            f"{path}.condition",
            f"completed needs restart policy Never or OnFailure on service {quote(dep.service)}"
            " (Always never completes)",
        )


def healthcheck(errors: Violations, path: str, check: v1.HealthCheck) -> None:
    """Check one service's healthcheck (see the module docstring)."""
    probes = [name for name in ("exec", "http", "tcp") if check.HasField(name)]
    if len(probes) != 1:
        found = ", ".join(probes) or "none"
        errors.add(path, f"exactly one of exec, http and tcp is required, found {found}")
    if check.HasField("exec") and not any(check.exec.command):
        errors.add(f"{path}.exec.command", "required: the command to run")
    if check.HasField("http"):
        errors.between(f"{path}.http.port", check.http.port, 1, 65535)
        if check.http.path and not check.http.path.startswith("/"):
            errors.add(f"{path}.http.path", f"must start with '/', not {quote(check.http.path)}")
        try:
            servicegraph.parse_status_range(check.http.expected_status)
        except ValueError as exc:
            errors.add(f"{path}.http.expectedStatus", str(exc))
    if check.HasField("tcp"):
        errors.between(f"{path}.tcp.port", check.tcp.port, 1, 65535)
    for field, text, positive in (
        ("interval", check.interval, True),
        ("timeout", check.timeout, True),
        ("startPeriod", check.start_period, False),
    ):
        _duration(errors, f"{path}.{field}", text, positive=positive)
    errors.non_negative(f"{path}.retries", check.retries)


def _duration(errors: Violations, path: str, text: str, *, positive: bool) -> None:
    if not text:
        return
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        errors.add(path, str(exc))
        return
    if positive and seconds <= 0:
        errors.add(path, f"must be longer than 0, not {quote(text)}")
    elif seconds > _MAX_INTERVAL_SECONDS:
        errors.add(path, f"must be at most 24h, not {quote(text)}")


def toleration_seconds(errors: Violations, path: str, toleration: v1.Toleration) -> None:
    """tolerationSeconds: not negative, and only for effect NoExecute (the only effect that evicts)."""
    if not toleration.HasField("toleration_seconds"):
        return
    if toleration.toleration_seconds < 0:
        errors.add(f"{path}.tolerationSeconds", f"must not be negative, not {toleration.toleration_seconds}")
    if toleration.effect != "NoExecute":
        errors.add(f"{path}.tolerationSeconds", 'only allowed with effect "NoExecute"')


__all__ = ["dependencies", "healthcheck", "toleration_seconds"]
