"""`cara up --config FILE` / `--set`: the settings passed through to the controllers and the agent, checked by name
before anything starts, and accepted by the real processes' own flag parsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from caravanserai.agent.__main__ import parser as agent_parser
from caravanserai.cli import clusterconfig
from caravanserai.cli.supervisor import ClusterSpec
from caravanserai.controllers.manager import parser as manager_parser

CONFIG = """\
controllers:
  heartbeat-timeout: 20s
  grace-period: 30
  succeeded-ttl: 1h
  strategy: binpack
  terminating-timeout: 2m
  unhealthy-threshold: 0.8
agent:
  labels: {zone: a, tier: edge}
  resources: {gpu: 2}
  network-pool: 2
  stop-timeout: 5s
  reserved-cpu: 250m
  reserved-memory: 256Mi
  pull-timeout: 2m
"""


def spec(settings: clusterconfig.ClusterSettings, data_dir: Path) -> ClusterSpec:
    return ClusterSpec(
        data_dir=str(data_dir),
        api_listen="127.0.0.1:7420",
        etcd_client_port=2379,
        etcd_peer_port=2380,
        agent=True,
        agent_listen="127.0.0.1:7421",
        node_name="n1",
        controller_flags=settings.flags(clusterconfig.CONTROLLERS),
        agent_flags=settings.flags(clusterconfig.AGENT),
    )


def test_a_config_file_becomes_flags_the_real_processes_accept(tmp_path: Path) -> None:
    path = tmp_path / "cara.yaml"
    path.write_text(CONFIG)
    settings = clusterconfig.load(path, ["controllers.grace-period=45s", "agent.labels.zone=b"])
    children = {child.name: child.argv for child in spec(settings, tmp_path).children()}
    manager = manager_parser().parse_args(children["controller-manager"][3:])
    assert (manager.heartbeat_timeout, manager.grace_period, manager.succeeded_ttl) == (20.0, 45.0, 3600.0)
    assert (manager.strategy, manager.terminating_timeout, manager.unhealthy_threshold) == ("binpack", 120.0, 0.8)
    agent = agent_parser().parse_args(children["agent"][3:])
    assert sorted(agent.label) == [("tier", "edge"), ("zone", "b")]
    assert (agent.network_pool, agent.stop_timeout, agent.reserved_cpu, agent.reserved_memory) == (
        2,
        5,
        "250m",
        "256Mi",
    )
    assert agent.pull_timeout == 120.0
    assert agent.fence_after == 65.0  # derived: the controllers' heartbeat timeout + grace period
    assert agent.heartbeat_interval == pytest.approx(20 / 3)  # three beats per heartbeat timeout


def test_every_key_is_a_flag_of_its_process() -> None:
    """The tables cannot drift from the processes' flags."""
    manager_flags = {flag for action in manager_parser()._actions for flag in action.option_strings}
    agent_flags = {flag for action in agent_parser()._actions for flag in action.option_strings}
    assert {s.flag for s in clusterconfig.CONTROLLER_SETTINGS.values()} <= manager_flags
    assert {s.flag for s in clusterconfig.AGENT_SETTINGS.values()} <= agent_flags


def test_without_settings_nothing_is_passed() -> None:
    settings = clusterconfig.load(None, [])
    assert settings.flags(clusterconfig.CONTROLLERS) == [] and settings.flags(clusterconfig.AGENT) == []


@pytest.mark.parametrize(
    ("text", "sets", "message"),
    [
        (
            "controllers: {heartbeat-timout: 20s}\n",
            [],
            'cara.yaml: controllers.heartbeat-timout: unknown key (did you mean "heartbeat-timeout"?)',
        ),
        ("agnet: {labels: {a: b}}\n", [], 'cara.yaml: agnet: unknown key (did you mean "agent"?)'),
        ("agent: {listen: 0.0.0.0:1}\n", [], "cara.yaml: agent.listen: unknown key"),  # cara up decides it
        (
            "agent: {stop-timeout: soon}\n",
            [],
            "cara.yaml: agent.stop-timeout: invalid duration 'soon': use e.g. 90, 90s, 500ms, 3m, 1h30m",
        ),
        ("agent: {labels: zone=a}\n", [], "cara.yaml: agent.labels: expected a mapping (e.g. {zone: a})"),
        ("controllers: {strategy: [a]}\n", [], "cara.yaml: controllers.strategy: expected a single value"),
        (
            "controllers: {strategy: pack}\n",
            [],
            "cara.yaml: controllers.strategy: must be one of spread, binpack, not 'pack'",
        ),
        ("- a\n", [], "cara.yaml: expected a mapping with sections controllers and agent"),
        (  # one line, without the YAML library's context lines or its hint about its own documentation
            "agent: {}\nagent: {}\n",
            [],
            'cara.yaml: line 2, column 1: invalid YAML: found duplicate key "agent" with value "{}" '
            '(original value: "{}")',
        ),
        (
            "agent: [\n",
            [],
            "cara.yaml: line 2, column 1: invalid YAML: expected the node content, but found '<stream end>'",
        ),
        ("", ["controllers.grace=1s"], '--set: controllers.grace: unknown key (did you mean "grace-period"?)'),
        (
            "",
            ["grace-period=1s"],
            "--set grace-period=1s: expected SECTION.KEY=VALUE (e.g. controllers.grace-period=30s)",
        ),
        (
            "",
            ["controllers.heartbeat-timeout=5s", "agent.heartbeat-interval=5s"],
            "agent.heartbeat-interval (5s) must be shorter than controllers.heartbeat-timeout (5s)",
        ),
    ],
)
def test_refusals_name_the_key(tmp_path: Path, text: str, sets: list[str], message: str) -> None:
    path = tmp_path / "cara.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        clusterconfig.load(path, sets)
    assert str(caught.value).replace(str(tmp_path) + "/", "") == message


def test_caractrl_config_file_errors_are_one_line_without_the_yaml_librarys_hint(tmp_path: Path) -> None:
    from caravanserai.cli.config import ConfigError, load_config

    path = tmp_path / "config.yaml"
    path.write_text("server: a:1\nserver: b:2\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f'config file {path}: line 2, column 1: invalid YAML: found duplicate key "server" with value "b:2" '
        '(original value: "a:1")'
    )
