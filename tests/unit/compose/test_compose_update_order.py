"""Compose's `deploy.update_config.order` (per service) as the project's `spec.update.order`."""

from __future__ import annotations

from pathlib import Path

from test_compose_mapping import convert, notes

from caravanserai import v1


def test_start_first_becomes_the_projects_order(tmp_path: Path) -> None:
    body = """
        web:
          image: x
          deploy: {update_config: {order: start-first, parallelism: 2}}
        worker:
          image: y
        """
    assert convert(body, tmp_path).project.spec.update.order == v1.UPDATE_START_FIRST
    assert notes(body, tmp_path) == [
        "services.web.deploy.update_config.parallelism: has no equivalent for a single project: left out"
    ]


def test_one_order_per_project_is_said(tmp_path: Path) -> None:
    body = """
        web: {image: x, deploy: {update_config: {order: start-first}}}
        db: {image: y, deploy: {update_config: {order: stop-first}}}
        """
    assert convert(body, tmp_path).project.spec.update.order == v1.UPDATE_START_FIRST
    assert notes(body, tmp_path) == [
        "services.web.deploy.update_config.order: one order per project: start-first for every service, db too"
    ]


def test_host_ports_keep_stop_first(tmp_path: Path) -> None:
    body = """
        web: {image: x, ports: ["8080:80"], deploy: {update_config: {order: start-first}}}
        """
    assert convert(body, tmp_path).project.spec.update.order == ""
    assert notes(body, tmp_path) == [
        "services.web.deploy.update_config.order: start-first is not possible with host ports (service web): "
        "stop-first is used"
    ]
