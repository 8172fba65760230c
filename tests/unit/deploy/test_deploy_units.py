"""The systemd units of deploy/systemd start our programs with flags those programs accept (with the example
environment files' values), and every unit has the sections systemd needs."""

from __future__ import annotations

import argparse
import configparser
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from caravanserai.agent.__main__ import parser as agent_parser
from caravanserai.agent.fencing.__main__ import parser as watchdog_parser
from caravanserai.apiserver.__main__ import _parser as apiserver_parser
from caravanserai.controllers.autoscaler.__main__ import parser as autoscaler_parser
from caravanserai.controllers.manager import parser as manager_parser

UNITS = Path(__file__).resolve().parents[3] / "deploy" / "systemd"
PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "cara-apiserver": apiserver_parser,
    "cara-controller-manager": manager_parser,
    "cara-agent": agent_parser,
    "cara-autoscaler": autoscaler_parser,
    "cara-fence-watchdog": watchdog_parser,
}


def _environment() -> dict[str, str]:
    values = {"H": "m1"}  # %H, the host name
    for name in ("cluster.env.example", "etcd.env.example"):
        for line in (UNITS / name).read_text().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                values[key] = value
    return values


def _exec_start(unit: str) -> list[str]:
    config = configparser.ConfigParser(interpolation=None, strict=False)
    config.read_string((UNITS / unit).read_text().replace("\\\n", " "))
    assert {"Unit", "Service", "Install"} <= set(config.sections())
    env = _environment()
    line = re.sub(r"\$\{(\w+)\}|%(\w)", lambda m: env[m.group(1) or m.group(2)], config["Service"]["ExecStart"])
    return shlex.split(line)


@pytest.mark.parametrize("program", sorted(PARSERS))
def test_units_pass_flags_their_program_accepts(program: str) -> None:
    argv = _exec_start(f"{program}.service")
    assert Path(argv[0]).name == program
    PARSERS[program]().parse_args(argv[1:])  # exits (SystemExit) on an unknown or malformed flag


def test_etcd_unit_names_every_member_and_mutual_tls() -> None:
    argv = _exec_start("cara-etcd.service")
    assert "--client-cert-auth" in argv and "--peer-client-cert-auth" in argv
    cluster = next(a for a in argv if a.startswith("--initial-cluster="))
    assert cluster.count("https://") == 3


@pytest.mark.parametrize("unit", ["cara-agent", "cara-fence-watchdog"])
def test_the_agent_and_its_watchdog_restart_at_once_and_never_give_up(unit: str) -> None:
    """The node's ingress is served by the agent, and the fence deadline holds while the agent or its watchdog
    runs: either, crashed, is restarted within a second, however often."""
    config = configparser.ConfigParser(interpolation=None, strict=False)
    config.read_string((UNITS / f"{unit}.service").read_text().replace("\\\n", " "))
    assert config["Service"]["Restart"] == "always"
    assert config["Service"]["RestartSec"] in ("1s", "1", "500ms")
    assert config["Unit"]["StartLimitIntervalSec"] == "0"  # systemd's default gives up after 5 starts in 10 s


def test_the_watchdog_reads_where_the_agent_records_its_deadline() -> None:
    agent, watchdog = _exec_start("cara-agent.service"), _exec_start("cara-fence-watchdog.service")
    agent_args = agent_parser().parse_args(agent[1:])
    watchdog_args = watchdog_parser().parse_args(watchdog[1:])
    assert agent_args.fence_dir and agent_args.fence_dir == watchdog_args.fence_dir
    assert agent_args.node_name == watchdog_args.node_name
