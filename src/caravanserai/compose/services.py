"""One Compose service to one `v1.Service`: each key of the specification's service, or a line saying why not.

The rules, in Compose's meaning:

* `entrypoint` is the image's ENTRYPOINT override: `command`; `command` is the CMD override: `args`. The string
  form is split as a shell would split it (no shell runs), as Compose does.
* `environment` (list or mapping; `KEY` alone or `KEY:` null takes the value from the environment the file is
  converted in, and is left out when unset) wins over `env_file` (files of `KEY=VALUE` lines, read now: their
  values are written into the manifest).
* `restart`: `no` (Compose's default when absent) → Never, `always` and `unless-stopped` → Always, `on-failure[:N]`
  → OnFailure (N is said and left out); without `restart`, `deploy.restart_policy.condition` is read.
* `healthcheck.test`: `CMD …` runs as it is, `CMD-SHELL …` (and the string form) through `/bin/sh -c`, `NONE` and
  `disable: true` mean no check. Docker's defaults (interval 30s, timeout 30s, retries 3) are written out, since a
  Project's are shorter.
* `depends_on` conditions `service_started` / `service_healthy` / `service_completed_successfully` → started /
  healthy / completed.
* Resources: `deploy.resources.limits` (and `cpus`, `mem_limit`) → limits; `reservations` (and `mem_reservation`)
  → requests.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from caravanserai import v1
from caravanserai.compose.context import Context
from caravanserai.compose.problems import join
from caravanserai.compose.units import boolean, duration, integer, size, text

_CONDITIONS = {"service_started": "started", "service_healthy": "healthy"}
_CONDITIONS |= {"service_completed_successfully": "completed"}
_RESTART = {"no": "Never", "always": "Always", "unless-stopped": "Always", "on-failure": "OnFailure"}
_DEPLOY_RESTART = {"none": "Never", "any": "Always", "on-failure": "OnFailure"}
_PULL = {"always": "Always", "never": "Never", "missing": "IfNotPresent", "if_not_present": "IfNotPresent"}


def words(value: object, ctx: Context, path: str) -> list[str]:
    """A command in exec form: a list as it is, a string split like a shell would (quotes kept together)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [text(item) for item in value]
    try:
        return shlex.split(str(value))
    except ValueError as exc:
        raise ctx.error(path, f"cannot split the command: {exc}") from None


def pairs(value: object, separator: str = "=") -> list[tuple[str, object]]:
    """A Compose list-or-dict (`["A=1", "B"]` or `{A: 1, B: null}`) as (key, value) pairs; a list item without
    the separator has the value None."""
    if isinstance(value, dict):
        return list(value.items())
    result: list[tuple[str, object]] = []
    for item in value if isinstance(value, list) else []:
        key, found, rest = str(item).partition(separator)
        result.append((key, rest if found else None))
    return result


EnvFileReader = Callable[[object, str], dict[str, str]]
"""Reads one `env_file` entry (a path or `{path, required, format}`) whose key path is the second argument."""


def convert_env(service: dict[str, Any], ctx: Context, path: str, read_env_file: EnvFileReader) -> list[v1.EnvVar]:
    """`env_file` first, then `environment`, later values winning, in order of first appearance."""
    values: dict[str, str] = {}
    files = service.get("env_file") or []
    for index, entry in enumerate([files] if isinstance(files, str) else files):
        values.update(read_env_file(entry, join(join(path, "env_file"), index)))
    for key, value in pairs(service.get("environment")):
        if value is None:
            inherited = ctx.environ.get(key)
            if inherited is None:
                values.pop(key, None)
                continue
            value = inherited
        values[key] = text(value)
    return [v1.EnvVar(name=key, value=value) for key, value in values.items()]


def convert_restart(service: dict[str, Any], ctx: Context, path: str) -> str:
    policy = service.get("restart")
    if policy is None:
        condition = ((service.get("deploy") or {}).get("restart_policy") or {}).get("condition")
        if condition is None:
            return "Never"
        found = _DEPLOY_RESTART.get(str(condition))
        if found is None:
            raise ctx.error(join(path, "deploy.restart_policy.condition"), "must be none, on-failure or any")
        return found
    name, _, retries = str(policy).partition(":")
    found = _RESTART.get(name)
    if found is None or (retries and (name != "on-failure" or not retries.isdigit())):
        raise ctx.error(join(path, "restart"), f"must be no, always, on-failure[:N] or unless-stopped, not {policy!r}")
    if retries:
        ctx.note(join(path, "restart"), f"at most {retries} restarts has no equivalent: restarted on every failure")
    return found


def convert_depends_on(service: dict[str, Any], ctx: Context, path: str, rename: dict[str, str]) -> list[Any]:
    deps = service.get("depends_on") or []
    entries = [(name, {"condition": "service_started"}) for name in deps] if isinstance(deps, list) else deps.items()
    result = []
    for name, settings in entries:
        where = join(join(path, "depends_on"), name)
        if name not in rename:
            raise ctx.error(where, f"service {name!r} is not a service of this file")
        if settings.get("required") is False:
            ctx.note(join(where, "required"), "every dependency is required: the service waits for it")
        if settings.get("restart") not in (None, False, "false"):
            ctx.note(join(where, "restart"), "has no equivalent: a restarted dependency does not restart this one")
        condition = _CONDITIONS[str(settings.get("condition", "service_started"))]
        result.append(v1.ServiceDependency(service=rename[name], condition=condition))
    return result


def convert_healthcheck(service: dict[str, Any], ctx: Context, path: str) -> v1.HealthCheck | None:
    check = service.get("healthcheck")
    where = join(path, "healthcheck")
    if not check or (check.get("disable") is not None and boolean(check["disable"])):
        return None
    test = check.get("test")
    if test is None:
        ctx.note(where, "a check without test (the image's HEALTHCHECK, retimed) has no equivalent: left out")
        return None
    command = _test_command(test, ctx, join(where, "test"))
    if command is None:
        return None
    result = v1.HealthCheck(exec=v1.ExecCheck(command=command), retries=3, interval="30s", timeout="30s")
    for key, parse in (("interval", duration), ("timeout", duration), ("start_period", duration), ("retries", integer)):
        if key in check:
            try:
                setattr(result, key, parse(check[key]))
            except ValueError as exc:
                raise ctx.error(join(where, key), str(exc)) from None
    if "start_interval" in check:
        ctx.note(join(where, "start_interval"), "has no equivalent: checks run every interval from the start")
    return result


def _test_command(test: object, ctx: Context, path: str) -> list[str] | None:
    if isinstance(test, str):
        return ["/bin/sh", "-c", test]
    items = [str(item) for item in test] if isinstance(test, list) else []
    if not items:
        raise ctx.error(path, "is empty: write CMD, CMD-SHELL or NONE and the command")
    head, rest = items[0], items[1:]
    if head == "NONE":
        return None
    if head == "CMD" and rest:
        return rest
    if head == "CMD-SHELL" and rest:
        return ["/bin/sh", "-c", " ".join(rest)]
    raise ctx.error(path, f"must start with CMD, CMD-SHELL or NONE followed by the command, not {head!r}")


def convert_resources(service: dict[str, Any], ctx: Context, path: str) -> v1.ResourceRequirements | None:
    resources = ((service.get("deploy") or {}).get("resources")) or {}
    limits, reservations = resources.get("limits") or {}, resources.get("reservations") or {}
    result = v1.ResourceRequirements()
    wanted = [
        (limits.get("cpus", service.get("cpus")), result.limits, "cpu"),
        (limits.get("memory", service.get("mem_limit")), result.limits, "memory"),
        (reservations.get("cpus"), result.requests, "cpu"),
        (reservations.get("memory", service.get("mem_reservation")), result.requests, "memory"),
    ]
    try:
        for value, target, key in wanted:
            if value not in (None, "", 0, "0"):
                target[key] = text(value) if key == "cpu" else size(value)
    except ValueError as exc:
        raise ctx.error(join(path, "deploy.resources"), str(exc)) from None
    deploy = join(path, "deploy.resources")
    if "pids" in limits:
        ctx.note(join(deploy, "limits.pids"), "a PID limit has no equivalent: left out")
    for key in ("generic_resources", "devices"):
        if key in reservations:
            ctx.note(
                join(deploy, f"reservations.{key}"),
                "ask for devices as extended resources instead (resources.requests, e.g. nvidia.com/gpu: 1)",
            )
    return result if result.limits or result.requests else None


def convert_pull_policy(service: dict[str, Any], ctx: Context, path: str) -> str:
    policy = service.get("pull_policy")
    if policy is None:
        return ""
    found = _PULL.get(str(policy))
    if found is None:
        ctx.note(join(path, "pull_policy"), f"{policy} has no equivalent: the image is pulled when missing")
        return ""
    return found


__all__ = [
    "EnvFileReader",
    "convert_depends_on",
    "convert_env",
    "convert_healthcheck",
    "convert_pull_policy",
    "convert_resources",
    "convert_restart",
    "pairs",
    "words",
]
