"""`spec.update.order` of a project: known orders, and start-first only where two containers can run side by side."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds import validate_object
from caravanserai.errors import Invalid
from caravanserai.testing.builders import project


def web(order: str) -> v1.Project:
    p = project("shop", services=["web", "db"])
    p.spec.update.order = order
    p.spec.services[0].ports.add(name="http", container_port=8080)
    return p


def violations(p: v1.Project) -> list[tuple[str, str]]:
    with pytest.raises(Invalid) as info:
        validate_object("projects", p)
    return [(v.field, v.description) for v in info.value.violations]


@pytest.mark.parametrize("order", ["", "stop-first", "start-first"])
def test_known_orders_pass(order: str) -> None:
    validate_object("projects", web(order))


def test_an_unknown_order_is_refused_with_its_field_path() -> None:
    [(field, message)] = violations(web("rolling"))
    assert field == "spec.update.order"
    assert message == 'must be one of "stop-first", "start-first" (or empty for stop-first), not "rolling"'


def test_start_first_is_refused_for_a_service_on_host_ports() -> None:
    p = web("start-first")
    p.spec.services[1].ports.add(name="pg", container_port=5432, host_port=5432)
    p.spec.services[0].network_mode = v1.NETWORK_MODE_HOST
    del p.spec.services[0].ports[:]
    found = violations(p)
    assert [field for field, _ in found] == ["spec.services[0].networkMode", "spec.services[1].ports[0].hostPort"]
    assert 'service "db" publishes host port 5432: spec.update.order start-first runs two containers' in found[1][1]
    p.spec.update.order = "stop-first"  # the default replaces them one after the other: allowed
    validate_object("projects", p)
