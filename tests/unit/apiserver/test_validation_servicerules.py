"""Validation of dependsOn, healthcheck and tolerationSeconds: each rule has a table row that breaks it once,
reported at its field path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds import validate_object
from caravanserai.errors import Invalid
from caravanserai.project import servicegraph


def app() -> v1.Project:
    """Compose-style: migrate (a job) and db (healthy via tcp) before web (http check)."""
    return v1.Project(
        api_version="caravanserai/v1",
        kind="Project",
        metadata=v1.ObjectMeta(name="app"),
        spec=v1.ProjectSpec(
            services=[
                v1.Service(
                    name="db",
                    image="db:1",
                    healthcheck=v1.HealthCheck(tcp=v1.TcpCheck(port=5432), interval="2s", timeout="1s", retries=2),
                ),
                v1.Service(
                    name="migrate",
                    image="db:1",
                    restart_policy="OnFailure",
                    depends_on=[v1.ServiceDependency(service="db", condition="healthy")],
                ),
                v1.Service(
                    name="web",
                    image="web:1",
                    depends_on=[
                        v1.ServiceDependency(service="db", condition="healthy"),
                        v1.ServiceDependency(service="migrate", condition="completed"),
                    ],
                    healthcheck=v1.HealthCheck(
                        http=v1.HttpCheck(path="/healthz", port=8080, expected_status="200-299"), start_period="5s"
                    ),
                ),
                v1.Service(
                    name="side",
                    image="x:1",
                    depends_on=[v1.ServiceDependency(service="web")],
                    healthcheck=v1.HealthCheck(exec=v1.ExecCheck(command=["true"])),
                ),
            ],
            tolerations=[v1.Toleration(key="maint", operator="Exists", effect="NoExecute", toleration_seconds=30)],
        ),
    )


Mutation = Callable[[v1.Project], Any]


CASES: list[tuple[Mutation, str, str]] = [
    (
        lambda p: setattr(p.spec.services[2].depends_on[0], "service", "cache"),
        "spec.services[2].dependsOn[0].service",
        'service "cache" is not declared in spec.services',
    ),
    (
        lambda p: setattr(p.spec.services[2].depends_on[0], "service", "web"),
        "spec.services[2].dependsOn[0].service",
        "a service cannot depend on itself",
    ),
    (
        lambda p: setattr(p.spec.services[2].depends_on[0], "service", ""),
        "spec.services[2].dependsOn[0].service",
        "is required",
    ),
    (
        lambda p: setattr(p.spec.services[2].depends_on[0], "condition", "ready"),
        "spec.services[2].dependsOn[0].condition",
        'must be one of "started", "healthy", "completed" (or empty for started), not "ready"',
    ),
    (
        lambda p: p.spec.services[0].depends_on.add(service="side"),
        "spec.services[2].dependsOn[0].service",
        "dependency cycle: db -> side -> web -> db",
    ),
    (
        lambda p: p.spec.services[2].depends_on.add(service="db"),
        "spec.services[2].dependsOn[2].service",
        'duplicate dependency "db"',
    ),
    (
        lambda p: p.spec.services[3].depends_on.add(service="side", condition="healthy"),
        "spec.services[3].dependsOn[1].service",
        "a service cannot depend on itself",
    ),
    (
        lambda p: (
            p.spec.services[2].ClearField("healthcheck"),
            setattr(p.spec.services[3].depends_on[0], "condition", "healthy"),
        ),
        "spec.services[3].dependsOn[0].condition",
        'healthy needs a healthcheck on service "web"',
    ),
    (
        lambda p: setattr(p.spec.services[1], "restart_policy", "Always"),
        "spec.services[2].dependsOn[1].condition",
        'completed needs restart policy Never or OnFailure on service "migrate"',
    ),
    (
        lambda p: p.spec.services[0].healthcheck.exec.command.append("true"),
        "spec.services[0].healthcheck",
        "exactly one of exec, http and tcp is required, found exec, tcp",
    ),
    (
        lambda p: p.spec.services[0].healthcheck.ClearField("tcp"),
        "spec.services[0].healthcheck",
        "exactly one of exec, http and tcp is required, found none",
    ),
    (
        lambda p: setattr(p.spec.services[0].healthcheck.tcp, "port", 0),
        "spec.services[0].healthcheck.tcp.port",
        "between 1 and 65535",
    ),
    (
        lambda p: setattr(p.spec.services[2].healthcheck.http, "port", 70000),
        "spec.services[2].healthcheck.http.port",
        "between 1 and 65535",
    ),
    (
        lambda p: setattr(p.spec.services[2].healthcheck.http, "path", "healthz"),
        "spec.services[2].healthcheck.http.path",
        "must start with '/'",
    ),
    (
        lambda p: setattr(p.spec.services[2].healthcheck.http, "expected_status", "399-200"),
        "spec.services[2].healthcheck.http.expectedStatus",
        "low to high",
    ),
    (
        lambda p: setattr(p.spec.services[2].healthcheck.http, "expected_status", "ok"),
        "spec.services[2].healthcheck.http.expectedStatus",
        "status code or range",
    ),
    (
        lambda p: p.spec.services[3].healthcheck.exec.ClearField("command"),
        "spec.services[3].healthcheck.exec.command",
        "required",
    ),
    (
        lambda p: setattr(p.spec.services[0].healthcheck, "interval", "0s"),
        "spec.services[0].healthcheck.interval",
        "must be longer than 0",
    ),
    (
        lambda p: setattr(p.spec.services[0].healthcheck, "timeout", "soon"),
        "spec.services[0].healthcheck.timeout",
        "invalid duration",
    ),
    (
        lambda p: setattr(p.spec.services[0].healthcheck, "start_period", "2d"),
        "spec.services[0].healthcheck.startPeriod",
        "at most 24h",
    ),
    (
        lambda p: setattr(p.spec.services[0].healthcheck, "retries", -1),
        "spec.services[0].healthcheck.retries",
        "must not be negative",
    ),
    (
        lambda p: setattr(p.spec.tolerations[0], "toleration_seconds", -5),
        "spec.tolerations[0].tolerationSeconds",
        "must not be negative",
    ),
    (
        lambda p: setattr(p.spec.tolerations[0], "effect", "NoSchedule"),
        "spec.tolerations[0].tolerationSeconds",
        'only allowed with effect "NoExecute"',
    ),
]


def test_the_compose_style_app_is_valid() -> None:
    validate_object("projects", app())


@pytest.mark.parametrize(("mutate", "path", "message"), [pytest.param(*c, id=c[1]) for c in CASES])
def test_rules(mutate: Mutation, path: str, message: str) -> None:
    project = app()
    mutate(project)
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    violations = [(v.field, v.description) for v in info.value.violations]
    assert [field for field, _ in violations] == [path], violations
    assert message in violations[0][1]


def test_cycles_are_found_in_order_and_absent_ones_are_not() -> None:
    spec = app().spec
    assert servicegraph.find_cycle(spec) == []
    spec.services[0].depends_on.add(service="web")
    assert servicegraph.find_cycle(spec) == ["db", "web"]


def test_health_settings_defaults() -> None:
    settings = servicegraph.HealthSettings.of(v1.HealthCheck(tcp=v1.TcpCheck(port=1)))
    assert (settings.interval, settings.timeout, settings.retries, settings.start_period) == (10.0, 5.0, 3, 0.0)
    assert servicegraph.parse_status_range("") == (200, 399)
    assert servicegraph.parse_status_range("204") == (204, 204)
