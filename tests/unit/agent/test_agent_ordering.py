"""dependsOn start order: what a service waits for, per condition (table-tested)."""

from __future__ import annotations

from typing import Any

import pytest

from caravanserai import v1
from caravanserai.agent.docker.records import Observed
from caravanserai.agent.workload import ordering


def app() -> v1.ProjectSpec:
    spec = v1.ProjectSpec()
    spec.services.add(name="db", image="i", healthcheck=v1.HealthCheck(tcp=v1.TcpCheck(port=5432)))
    spec.services.add(
        name="migrate",
        image="i",
        restart_policy="OnFailure",
        depends_on=[v1.ServiceDependency(service="db", condition="healthy")],
    )
    spec.services.add(name="cache", image="i")
    spec.services.add(
        name="web",
        image="i",
        depends_on=[
            v1.ServiceDependency(service="migrate", condition="completed"),
            v1.ServiceDependency(service="cache"),
        ],
    )
    return spec


def seen(service: str, status: str, code: int = 0, **extra: Any) -> Observed:
    return Observed(service=service, container_id=f"id-{service}", status=status, exit_code=code, **extra)


@pytest.mark.parametrize(
    ("service", "observed", "waits"),
    [
        ("db", {}, ""),
        ("migrate", {}, "db to be healthy"),
        ("migrate", {"db": seen("db", "running", health="starting")}, "db to be healthy"),
        ("migrate", {"db": seen("db", "running", health="healthy")}, ""),
        ("web", {}, "migrate to complete, cache to start"),
        (
            "web",
            {"migrate": seen("migrate", "running"), "cache": seen("cache", "created")},
            "migrate to complete, cache to start",
        ),
        ("web", {"migrate": seen("migrate", "exited", 1), "cache": seen("cache", "running")}, "migrate to complete"),
        ("web", {"migrate": seen("migrate", "exited", 0), "cache": seen("cache", "running")}, ""),
    ],
)
def test_unmet(service: str, observed: dict[str, Observed], waits: str) -> None:
    spec = app()
    target = next(s for s in spec.services if s.name == service)
    assert ordering.unmet(target, spec, observed) == waits
