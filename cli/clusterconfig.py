"""`cara up --config FILE` and `cara up --set SECTION.KEY=VALUE`: the settings of the local cluster's controllers
and agent, passed through to `cara-controller-manager` and `cara-agent` as their own flags.

The file (YAML or JSON) has two sections, each a mapping of the processes' flag names without `--`:

    controllers:              # cara-controller-manager (scheduler, node health, gc, placement, projectset)
      heartbeat-timeout: 20s  # NotReady after this long without a Lease renewal
      grace-period: 30s       # Running projects leave a NotReady node after this
      succeeded-ttl: 1h
      strategy: binpack
    agent:                    # the local node's cara-agent
      labels: {zone: a}       # node labels (--label zone=a)
      network-pool: 2
      stop-timeout: 5s
      reserved-cpu: 250m
      reserved-memory: 256Mi
      fence-after: 60s

`--set controllers.grace-period=30s` (repeatable) sets one key, after the file; `--set agent.labels.zone=a` one
entry of a mapping. `SETTINGS` lists every key, its flag and the kind of its value.

Guarantees:

* **Refused by name, before anything starts.** An unknown section or key (`controllers.heartbeat-timout: unknown
  key (did you mean "heartbeat-timeout"?)`), a value that does not parse (`agent.stop-timeout: invalid duration
  'soon': …`), a mapping where a value is expected or the other way round: one line naming the file and the key.
  Keys `cara up` decides itself (addresses, the node name, the API server, leader election) are not settings.
* **Times are durations** (`90`, `90s`, `1m30s`) everywhere, converted to what each flag takes.
* **Consistent with each other.** When the controllers' `heartbeat-timeout` or `grace-period` is set and the
  agent's `fence-after` is not, the agent fences itself after their sum (its default is the sum of their defaults);
  a `heartbeat-timeout` shorter than three agent heartbeats lowers the agent's `heartbeat-interval` to a third of it
  unless it is set, and an explicit `heartbeat-interval` not shorter than `heartbeat-timeout` is refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from caravanserai.text import yamlerror
from caravanserai.text.durations import parse_duration
from caravanserai.text.quantity import parse_quantity

CONTROLLERS = "controllers"
AGENT = "agent"
DEFAULT_HEARTBEAT_TIMEOUT = 90.0  # node health's defaults, which the agent's own --fence-after default adds up
DEFAULT_GRACE_PERIOD = 180.0
DEFAULT_HEARTBEAT_INTERVAL = 10.0


def _number(seconds: float) -> str:
    return str(int(seconds)) if seconds == int(seconds) else repr(seconds)


def _exact(seconds: float) -> str:
    return f"{_number(seconds)}s"  # exact, unlike format_duration's rounding (270 s is not "4m")


def _duration(text: str) -> str:
    return _exact(parse_duration(text))


def _seconds(text: str) -> str:
    return _number(parse_duration(text))


def _whole_seconds(text: str) -> str:
    return str(round(parse_duration(text)))


def _positive_seconds(text: str) -> str:
    if parse_duration(text) <= 0:
        raise ValueError(f"must be positive, not {text}")
    return _seconds(text)


def _count(text: str) -> str:
    value = int(text)
    if value < 0:
        raise ValueError(f"must not be negative, not {text}")
    return str(value)


def _share(text: str) -> str:
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(f"must be between 0 and 1, not {text}")
    return text


def _quantity(text: str) -> str:
    parse_quantity(text)
    return text


def _text(text: str) -> str:
    return text


def _choice(*allowed: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, not {text!r}")
        return text

    return check


@dataclass(frozen=True, slots=True)
class Setting:
    """One key: the flag it becomes, how its value is checked and written for the flag (`convert` raises
    ValueError), what it is (for the docs), and whether it is a mapping (each entry a repeated `--flag K=V`)."""

    flag: str
    convert: Callable[[str], str]
    kind: str
    mapping: bool = False


CONTROLLER_SETTINGS: dict[str, Setting] = {
    "controllers": Setting("--controllers", _text, "list (scheduler,node-health,gc,placement,projectset,queue,routes)"),
    "strategy": Setting("--strategy", _choice("spread", "binpack"), "spread | binpack"),
    "percentage-of-nodes-to-score": Setting("--percentage-of-nodes-to-score", _count, "percent"),
    "scheduler-workers": Setting("--scheduler-workers", _count, "count"),
    "heartbeat-timeout": Setting("--heartbeat-timeout", _duration, "duration"),
    "grace-period": Setting("--grace-period", _duration, "duration"),
    "terminating-timeout": Setting("--terminating-timeout", _duration, "duration"),
    "startup-grace-period": Setting("--startup-grace-period", _duration, "duration"),
    "unhealthy-threshold": Setting("--unhealthy-threshold", _share, "share 0…1"),
    "node-health-workers": Setting("--node-health-workers", _count, "count"),
    "terminated-delay": Setting("--terminated-delay", _duration, "duration"),
    "succeeded-ttl": Setting("--succeeded-ttl", _duration, "duration"),
    "gc-workers": Setting("--gc-workers", _count, "count"),
    "handoff-timeout": Setting("--handoff-timeout", _duration, "duration"),
    "placement-workers": Setting("--placement-workers", _count, "count"),
    "projectset-workers": Setting("--projectset-workers", _count, "count"),
    "log-level": Setting("--log-level", _choice("debug", "info", "warning", "error"), "debug | info | warning | error"),
}
"""The keys of `controllers:`, flags of `cara-controller-manager`."""

AGENT_SETTINGS: dict[str, Setting] = {
    "labels": Setting("--label", _text, "mapping of node labels", mapping=True),
    "resources": Setting("--resource", _count, "mapping of extended resources to counts", mapping=True),
    "heartbeat-interval": Setting("--heartbeat-interval", _positive_seconds, "duration"),
    "fence-after": Setting("--fence-after", _duration, "duration (0: never)"),
    "advertise-address": Setting("--advertise-address", _text, "address"),
    "reserved-cpu": Setting("--reserved-cpu", _quantity, "quantity"),
    "reserved-memory": Setting("--reserved-memory", _quantity, "quantity"),
    "workers": Setting("--workers", _count, "count"),
    "network-pool": Setting("--network-pool", _count, "count"),
    "network-range": Setting("--network-range", _text, "IPv4 range (CIDR)"),
    "network-prefix": Setting("--network-prefix", _count, "count (prefix bits)"),
    "stop-timeout": Setting("--stop-timeout", _whole_seconds, "duration"),
    "pull-timeout": Setting("--pull-timeout", _positive_seconds, "duration"),
    "data-dir": Setting("--data-dir", _text, "path"),
    "restic": Setting("--restic", _text, "path"),
    "restic-timeout": Setting("--restic-timeout", _positive_seconds, "duration"),
    "restic-cache-dir": Setting("--restic-cache-dir", _text, "path"),
    "ingress-max-request-body": Setting("--ingress-max-request-body", _quantity, "quantity"),
    "ingress-max-response-body": Setting("--ingress-max-response-body", _quantity, "quantity"),
    "ingress-connect-timeout": Setting("--ingress-connect-timeout", _duration, "duration"),
    "ingress-response-timeout": Setting("--ingress-response-timeout", _duration, "duration"),
    "ingress-idle-timeout": Setting("--ingress-idle-timeout", _duration, "duration"),
    "log-level": Setting("--log-level", _choice("debug", "info", "warning", "error"), "debug | info | warning | error"),
}
"""The keys of `agent:`, flags of `cara-agent`."""

SETTINGS: dict[str, dict[str, Setting]] = {CONTROLLERS: CONTROLLER_SETTINGS, AGENT: AGENT_SETTINGS}


@dataclass
class ClusterSettings:
    """The checked settings: per section, key → flag value (str), or for a mapping key → {entry: value}."""

    values: dict[str, dict[str, Any]] = field(default_factory=lambda: {CONTROLLERS: {}, AGENT: {}})

    def flags(self, section: str) -> list[str]:
        """The argv fragment of `section`'s process, keys in table order."""
        argv: list[str] = []
        given = self.values[section]
        for key, setting in SETTINGS[section].items():
            if key not in given:
                continue
            if setting.mapping:
                for entry, value in sorted(given[key].items()):
                    argv += [setting.flag, f"{entry}={value}"]
            else:
                argv += [setting.flag, given[key]]
        return argv


def _unknown(where: str, key: str, known: Sequence[str]) -> ValueError:
    close = difflib.get_close_matches(key, known, n=1) or [k for k in known if key and k.startswith(key)][:1]
    return ValueError(f"{where}: unknown key" + (f' (did you mean "{close[0]}"?)' if close else ""))


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise ValueError("expected a single value")


def _put(settings: ClusterSettings, origin: str, section: str, key: str, value: object) -> None:
    """Check one key of `section` and record it; ValueError naming `origin` and the key otherwise."""
    table = SETTINGS.get(section)
    if table is None:
        raise _unknown(f"{origin}: {section}", section, list(SETTINGS))
    where = f"{origin}: {section}.{key}"
    setting = table.get(key)
    if setting is None:
        raise _unknown(where, key, list(table))
    if setting.mapping:
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected a mapping (e.g. {{zone: a}})")
        entries = settings.values[section].setdefault(key, {})
        for entry, item in value.items():
            entries[str(entry)] = _convert(f"{where}.{entry}", setting, item)
        return
    settings.values[section][key] = _convert(where, setting, value)


def _convert(where: str, setting: Setting, value: object) -> str:
    try:
        return setting.convert(_scalar(value))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def read_file(settings: ClusterSettings, path: Path) -> None:
    """Add the settings of the file at `path`."""
    try:
        data = YAML(typ="safe").load(path.read_text())
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except YAMLError as exc:
        raise ValueError(f"{path}: {yamlerror.describe(exc)}") from None
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: expected a mapping with sections {' and '.join(SETTINGS)}")
    for section, keys in data.items():
        if str(section) not in SETTINGS:
            raise _unknown(f"{path}: {section}", str(section), list(SETTINGS))
        if keys is None:
            continue
        if not isinstance(keys, Mapping):
            raise ValueError(f"{path}: {section}: expected a mapping of settings")
        for key, value in keys.items():
            _put(settings, str(path), str(section), str(key), value)


def apply_set(settings: ClusterSettings, assignment: str) -> None:
    """Add one `--set SECTION.KEY=VALUE` (or `SECTION.KEY.ENTRY=VALUE` for a mapping)."""
    path, sep, value = assignment.partition("=")
    parts = path.split(".", 2)
    if not sep or len(parts) < 2:
        raise ValueError(f"--set {assignment}: expected SECTION.KEY=VALUE (e.g. controllers.grace-period=30s)")
    section, key = parts[0], parts[1]
    _put(settings, "--set", section, key, {parts[2]: value} if len(parts) == 3 else value)


def _derive(settings: ClusterSettings) -> None:
    """The agent's settings that follow from the controllers' (see the module docstring)."""
    controllers, agent = settings.values[CONTROLLERS], settings.values[AGENT]
    timeout = parse_duration(controllers.get("heartbeat-timeout", str(DEFAULT_HEARTBEAT_TIMEOUT)))
    grace = parse_duration(controllers.get("grace-period", str(DEFAULT_GRACE_PERIOD)))
    if ("heartbeat-timeout" in controllers or "grace-period" in controllers) and "fence-after" not in agent:
        agent["fence-after"] = _exact(timeout + grace)
    if "heartbeat-interval" in agent:
        if parse_duration(agent["heartbeat-interval"]) >= timeout:
            raise ValueError(
                f"agent.heartbeat-interval ({agent['heartbeat-interval']}s) must be shorter than "
                f"controllers.heartbeat-timeout ({_exact(timeout)})"
            )
    elif timeout < 3 * DEFAULT_HEARTBEAT_INTERVAL:
        agent["heartbeat-interval"] = _number(timeout / 3)


def load(config: Path | None, assignments: Sequence[str]) -> ClusterSettings:
    """The settings of `config` (None: none) then `assignments`, checked and completed; ValueError otherwise."""
    settings = ClusterSettings()
    if config is not None:
        read_file(settings, config)
    for assignment in assignments:
        apply_set(settings, assignment)
    _derive(settings)
    return settings


__all__ = [
    "AGENT",
    "AGENT_SETTINGS",
    "CONTROLLERS",
    "CONTROLLER_SETTINGS",
    "SETTINGS",
    "ClusterSettings",
    "Setting",
    "apply_set",
    "load",
    "read_file",
]
