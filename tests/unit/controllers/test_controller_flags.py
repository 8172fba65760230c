"""Flags of the controller processes: durations as operators write them, defaults, `--controllers`."""

from __future__ import annotations

import argparse

import pytest

from caravanserai.controllers import manager
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.nodehealth import app as nodehealth_app
from caravanserai.controllers.process import duration, process_parser
from caravanserai.controllers.scheduler import app as scheduler_app


def node_health(*argv: str) -> argparse.Namespace:
    parser = process_parser("cara-node-health", description="", lease="cara-node-health", metrics_port=10252)
    nodehealth_app.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("3m", 180.0), ("1s", 1.0), ("1", 1.0), ("1m30s", 90.0), ("2.5s", 2.5)],
)
def test_node_health_durations(text: str, seconds: float) -> None:
    opts = node_health("--heartbeat-timeout", text, "--grace-period", text, "--terminating-timeout", text)
    config = nodehealth_app.options_from_args(opts).config
    assert (config.heartbeat_timeout, config.grace_period, config.terminating_timeout) == (seconds,) * 3


@pytest.mark.parametrize("text", ["0.5s", "500ms", "0", "-3s", "soon", ""])
def test_node_health_refuses_durations_below_one_second(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        node_health("--startup-grace-period", text)
    assert exit_.value.code == 2
    assert "--startup-grace-period" in capsys.readouterr().err


def test_defaults() -> None:
    config = nodehealth_app.options_from_args(node_health()).config
    assert (config.heartbeat_timeout, config.grace_period, config.terminating_timeout) == (90.0, 180.0, 600.0)
    assert (config.startup_grace_period, config.unhealthy_threshold) == (60.0, 0.55)
    opts = node_health()
    assert opts.leader_elect and opts.leader_elect_lease == "cara-node-health" and opts.metrics_port == 10252
    assert not node_health("--no-leader-elect").leader_elect

    parser = process_parser("cara-scheduler", description="", lease="cara-scheduler", metrics_port=10251)
    scheduler_app.add_arguments(parser)
    options = scheduler_app.options_from_args(parser.parse_args(["--strategy", "binpack"]))
    assert options.config.policy.strategy == "binpack" and options.config.heartbeat_timeout == 90.0
    assert options.identity  # a default identity is made once

    parser = process_parser("cara-gc", description="", lease="cara-gc", metrics_port=10253)
    gc_app.add_arguments(parser)
    assert gc_app.options_from_args(parser.parse_args(["--terminated-delay", "0"])).config.terminated_delay == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("scheduler", ["scheduler"]),
        ("gc, scheduler", ["gc", "scheduler"]),
        ("scheduler,scheduler", ["scheduler"]),
        ("all", ["scheduler", "node-health", "gc", "placement", "projectset", "queue", "routes"]),
        ("*", ["scheduler", "node-health", "gc", "placement", "projectset", "queue", "routes"]),
    ],
)
def test_controller_list(text: str, expected: list[str]) -> None:
    assert manager.controller_list(text) == expected


@pytest.mark.parametrize("text", ["", "scheduler,nope", ","])
def test_controller_list_refuses_unknown_names(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="choose from scheduler, node-health, gc, placement"):
        manager.controller_list(text)


def test_the_combined_process_shares_the_heartbeat_timeout() -> None:
    opts = manager.parser().parse_args(["--heartbeat-timeout", "45s"])
    assert scheduler_app.options_from_args(opts).config.heartbeat_timeout == 45.0
    assert nodehealth_app.options_from_args(opts).config.heartbeat_timeout == 45.0
    assert duration(1.0)("2m") == 120.0
