"""A Compose file to one Project: reading, `.env`, interpolation, the specification's schema, then each service.

    conversion = convert_file("compose.yaml")
    conversion.project        # a v1.Project
    conversion.notes          # one Note per key without an equivalent

Guarantees:

* **Compose's reading.** The file's folder holds `.env`; the process environment wins over it. Every value is
  interpolated (`caravanserai.compose.interpolation`), then the file is checked against the Compose
  specification's schema (`caravanserai.compose.schema`), as Compose does.
* **Refused, with the path:** `extends` and `include` (not supported: the line says what to do), a service with
  `build:` and no `image:`, a service without an image, values with no meaning here (`network_mode: none`, port
  ranges of different lengths, …).
* **Said, never guessed silently:** every key without an equivalent gets one `Note`.
* The project's name is `name` (the caller's), else the file's `name:`, else its folder's name, made a DNS label.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from caravanserai import v1
from caravanserai.compose.context import Context
from caravanserai.compose.dotenv import DotenvError, parse_dotenv
from caravanserai.compose.interpolation import InterpolationError, substitute
from caravanserai.compose.mounts import (
    SECRETS_VOLUME,
    Volumes,
    convert_mounts,
    convert_secrets,
    declared_volume_notes,
    secrets_volume,
)
from caravanserai.compose.names import dns_label, is_dns_label
from caravanserai.compose.ports import convert_ports
from caravanserai.compose.problems import ComposeError, Note, join
from caravanserai.compose.runtime import apply_runtime
from caravanserai.compose.schema import validate
from caravanserai.compose.services import (
    convert_depends_on,
    convert_env,
    convert_healthcheck,
    convert_pull_policy,
    convert_resources,
    convert_restart,
    words,
)
from caravanserai.compose.unsupported import NO_EQUIVALENT, SERVICE_KEYS, SERVICE_NOTES, TOP_LEVEL_NOTES
from caravanserai.compose.yamltext import load_yaml

COMPOSE_FILE_NAMES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
"""The names Compose looks for in a folder, in its order."""

OVERRIDE_FILE_NAMES = tuple(name.replace(".y", ".override.y") for name in COMPOSE_FILE_NAMES)
"""The files Compose merges into the main one; refused (the merge is not done here), never applied on their own."""


@dataclass(frozen=True, slots=True)
class Conversion:
    """A converted Compose file: the Project and the lines about what did not convert as it is."""

    project: v1.Project
    notes: list[Note]


def is_compose(data: object) -> bool:
    """Whether parsed YAML is a Compose file rather than a manifest: a top-level `services:` and no `kind:`."""
    return isinstance(data, dict) and "services" in data and "kind" not in data


def looks_like_compose(text: str) -> bool:
    """Whether `text` is a Compose file by its content (one YAML document with `services:` and no `kind:`), so a
    manifest reader can hand it over; text that is not valid YAML is not (the manifest reader reports it)."""
    try:
        return is_compose(load_yaml(text, source=""))
    except ComposeError:
        return False


def find_compose_file(directory: str) -> str | None:
    """The Compose file of a folder (`compose.yaml`, …, `docker-compose.yml`), or None."""
    for name in COMPOSE_FILE_NAMES:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def convert_file(path: str, *, name: str = "", environ: dict[str, str] | None = None) -> Conversion:
    """The Project of the Compose file at `path` (a folder: its Compose file), read with `environ` (default: the
    process environment) over the `.env` file beside it."""
    if os.path.isdir(path):
        found = find_compose_file(path)
        if found is None:
            raise ComposeError(path, "", f"no Compose file in this folder ({', '.join(COMPOSE_FILE_NAMES)})")
        path = found
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
        raise ComposeError(path, "", f"cannot read: {reason}") from None
    return convert_text(text, source=path, directory=os.path.dirname(os.path.abspath(path)), name=name,
                        environ=dict(os.environ) if environ is None else environ)  # fmt: skip


def read_environment(directory: str, environ: dict[str, str], source: str) -> dict[str, str]:
    """`environ` over the variables of `directory/.env` (when there is one)."""
    dotenv = os.path.join(directory, ".env")
    if not os.path.isfile(dotenv):
        return dict(environ)
    try:
        with open(dotenv, encoding="utf-8-sig") as handle:
            values = parse_dotenv(handle.read(), lookup=environ.get)
    except (OSError, UnicodeDecodeError, DotenvError) as exc:
        raise ComposeError(source, "", f".env: {exc}") from None
    return values | environ


def convert_text(
    text: str, *, source: str, directory: str, name: str = "", environ: dict[str, str] | None = None
) -> Conversion:
    """The Project of the Compose file `text`; `directory` is its folder (for `.env`, `env_file` and bind mounts)."""
    if os.path.basename(source) in OVERRIDE_FILE_NAMES:
        raise ComposeError(
            source,
            "",
            "is an override file: Compose merges it into the main file, caractrl does not: convert the "
            "output of `docker compose config` instead",
        )
    ctx = Context(source, directory, read_environment(directory, environ or {}, source))
    data = load_yaml(text, source=source)
    if not is_compose(data):
        raise ctx.error("", "is not a Compose file: a top-level services: mapping is required")
    unset: list[str] = []
    data = _interpolated(data, ctx, "", unset)
    for variable in unset:
        ctx.note("", f'the variable "{variable}" is not set: it is read as a blank string (as Compose does)')
    validate(data, source=source)
    _refuse_unsupported(data, ctx)
    project = _project_name(name, data, ctx)
    return Conversion(_project(data, project, ctx), ctx.notes)


def _interpolated(value: Any, ctx: Context, path: str, unset: list[str]) -> Any:
    if isinstance(value, dict):
        return {_key(k, ctx, path): _interpolated(v, ctx, join(path, k), unset) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolated(v, ctx, join(path, i), unset) for i, v in enumerate(value)]
    if isinstance(value, str):
        try:
            return substitute(_unicode(value, ctx, path), ctx.environ.get, unset)
        except InterpolationError as exc:
            raise ctx.error(path, str(exc)) from None
    return value


def _key(key: Any, ctx: Context, path: str) -> Any:
    return _unicode(key, ctx, path) if isinstance(key, str) else key


def _unicode(text: str, ctx: Context, path: str) -> str:
    """`text` as valid Unicode: a pair of surrogate escapes ("\\ud83d\\ude00", which YAML reads as two halves) joined
    into its character; a ComposeError naming `path` for a half without its pair."""
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise ctx.error(path, "must be valid Unicode text, without unpaired surrogates") from None


def _refuse_unsupported(data: dict[str, Any], ctx: Context) -> None:
    if not data.get("services"):
        raise ctx.error("services", "at least one service is required")
    if "include" in data:
        raise ctx.error("include", "is not supported: convert each included file on its own (one project each)")
    for name, service in (data.get("services") or {}).items():
        path = join("services", name)
        if "extends" in service:
            raise ctx.error(
                join(path, "extends"), "is not supported: copy the keys of the extended service into this one"
            )
        if "build" in service and not service.get("image"):
            raise ctx.error(join(path, "build"), "build the image first (docker build -t NAME .) and set image: NAME")
        if not service.get("image"):
            raise ctx.error(join(path, "image"), "is required (a Project runs images; it builds none)")


def _project_name(name: str, data: dict[str, Any], ctx: Context) -> str:
    wanted = name or str(data.get("name") or "") or os.path.basename(ctx.directory.rstrip("/"))
    label = dns_label(wanted)
    if not label:
        raise ctx.error("name", f"cannot make a project name of {wanted!r}: pass --name")
    return label


def _project(data: dict[str, Any], name: str, ctx: Context) -> v1.Project:
    for key in data:
        if key in TOP_LEVEL_NOTES:
            ctx.note(key, TOP_LEVEL_NOTES[key])
    services = data.get("services") or {}
    rename = _service_names(services, ctx)
    vols = Volumes(name, dict(data.get("volumes") or {}))
    declared_volume_notes(vols.declared, ctx)
    if any(service.get("secrets") for service in services.values()):
        vols.volumes[SECRETS_VOLUME] = secrets_volume(name)  # first, so that no other volume takes its name
    project = v1.Project(api_version=v1.API_VERSION, kind="Project")
    project.metadata.name = name
    for compose_name, service in services.items():
        project.spec.services.append(
            _service(compose_name, service, ctx, vols, rename, name, project.spec.node_selector)
        )
    project.spec.volumes.extend(vols.volumes.values())
    project.spec.update.order = _update_order(services, project.spec, ctx)
    _networks_notes(data, ctx)
    _secrets_notes(data, name, ctx)
    return project


def _update_order(services: dict[str, Any], spec: v1.ProjectSpec, ctx: Context) -> str:
    """`spec.update.order` from the services' `deploy.update_config.order` (Compose sets it per service; a project
    has one order): start-first when a service asks for it and none binds a host port, else stop-first (said)."""
    asked = {
        compose_name: ((service.get("deploy") or {}).get("update_config") or {}).get("order", "")
        for compose_name, service in services.items()
    }
    starting = [n for n, order in asked.items() if order == v1.UPDATE_START_FIRST]
    if not starting:
        return ""
    where = join(join("services", starting[0]), "deploy.update_config.order")
    bound = [
        s.name for s in spec.services if s.network_mode == v1.NETWORK_MODE_HOST or any(p.host_port for p in s.ports)
    ]
    if bound:
        ctx.note(where, f"start-first is not possible with host ports (service {bound[0]}): stop-first is used")
        return ""
    stopping = [n for n, order in asked.items() if order == v1.UPDATE_STOP_FIRST]
    if stopping:
        ctx.note(where, f"one order per project: start-first for every service, {stopping[0]} too")
    return v1.UPDATE_START_FIRST


def _service_names(services: dict[str, Any], ctx: Context) -> dict[str, str]:
    rename: dict[str, str] = {}
    for compose_name in services:
        label = dns_label(compose_name)
        path = join("services", compose_name)
        if not label:
            raise ctx.error(path, "cannot make a service name (a DNS label) of this name")
        if label in rename.values():
            raise ctx.error(path, f"two services would both be named {label!r}: rename one")
        if not is_dns_label(compose_name):
            ctx.note(path, f"is named {label!r} (a DNS label): other services reach it as {label}, not {compose_name}")
        rename[compose_name] = label
    return rename


def _service(
    compose_name: str,
    service: dict[str, Any],
    ctx: Context,
    vols: Volumes,
    rename: dict[str, str],
    project: str,
    node_selector: MutableMapping[str, str],
) -> v1.Service:
    path = join("services", compose_name)
    name = rename[compose_name]
    out = v1.Service(name=name, image=str(service["image"]))
    out.command.extend(words(service.get("entrypoint"), ctx, join(path, "entrypoint")))
    out.args.extend(words(service.get("command"), ctx, join(path, "command")))
    out.env.extend(convert_env(service, ctx, path, lambda entry, where: _env_file(entry, ctx, where)))
    out.ports.extend(convert_ports(service, ctx, path))
    mounts, tmpfs = convert_mounts(service, name, vols, ctx, path)
    secrets = convert_secrets(service, ctx, path, project)
    out.volume_mounts.extend(mounts + ([secrets] if secrets else []))
    out.tmpfs.extend(tmpfs)
    out.depends_on.extend(convert_depends_on(service, ctx, path, rename))
    check = convert_healthcheck(service, ctx, path)
    if check is not None:
        out.healthcheck.CopyFrom(check)
    out.restart_policy = convert_restart(service, ctx, path)
    out.working_dir = str(service.get("working_dir", ""))
    resources = convert_resources(service, ctx, path)
    if resources is not None:
        out.resources.CopyFrom(resources)
    out.image_pull_policy = convert_pull_policy(service, ctx, path)
    apply_runtime(service, out, ctx, path)
    if out.network_mode == "host":
        _host_network_ports(out, ctx, path)
    _service_notes(service, ctx, path, node_selector)
    return out


def _host_network_ports(out: v1.Service, ctx: Context, path: str) -> None:
    """With the host's network nothing is mapped: Docker discards published ports, and so does the conversion
    (the container listens on the node's own ports), saying so."""
    for port in out.ports:
        if (port.host_port and port.host_port != port.container_port) or port.host_ip:
            ctx.note(
                join(path, "ports"),
                "published ports are discarded with network_mode: host (as Docker does): the container listens on "
                "the node's own ports",
            )
        port.host_port, port.host_ip = 0, ""


def _env_file(entry: object, ctx: Context, path: str) -> dict[str, str]:
    settings = entry if isinstance(entry, dict) else {"path": entry}
    file = ctx.host_path(str(settings["path"]))
    required = settings.get("required", True) not in (False, "false")
    if settings.get("format") not in (None, ""):
        ctx.note(join(path, "format"), f"format {settings['format']!r} has no equivalent: read as KEY=VALUE lines")
    try:
        with open(file, encoding="utf-8-sig") as handle:
            return parse_dotenv(handle.read(), lookup=ctx.environ.get)
    except FileNotFoundError:
        if required:
            raise ctx.error(path, f"file {settings['path']} not found") from None
        return {}
    except (OSError, UnicodeDecodeError, DotenvError) as exc:
        raise ctx.error(path, f"{settings['path']}: {exc}") from None


def _service_notes(service: dict[str, Any], ctx: Context, path: str, node_selector: MutableMapping[str, str]) -> None:
    for key in service:
        if key not in SERVICE_KEYS and not key.startswith("x-"):
            ctx.note(join(path, key), SERVICE_NOTES.get(key, NO_EQUIVALENT))
    if "build" in service:
        ctx.note(join(path, "build"), f"is not run: image {service['image']} is used as it is (build it first)")
    if service.get("container_name"):
        ctx.note(join(path, "container_name"), "containers are named by the agent: cara_<project>_<service>_<node>")
    if service.get("hostname"):
        ctx.note(join(path, "hostname"), "the host name is the service's name on the project network")
    if service.get("configs"):
        ctx.note(join(path, "configs"), "configs are not converted: see the line of the top-level configs")
    networks = service.get("networks") or []
    if any(n != "default" for n in networks):
        ctx.note(join(path, "networks"), "services of a project share one network: every service reaches every other")
    replicas = (service.get("deploy") or {}).get("replicas", service.get("scale"))
    if replicas not in (None, 1, "1"):
        where = join(path, "deploy.replicas" if "replicas" in (service.get("deploy") or {}) else "scale")
        ctx.note(where, f"{replicas} replicas need a replicated project (not yet): one container runs")
    _deploy_notes(service.get("deploy") or {}, ctx, join(path, "deploy"), node_selector)


def _deploy_notes(deploy: dict[str, Any], ctx: Context, path: str, node_selector: MutableMapping[str, str]) -> None:
    for key in ("mode", "endpoint_mode", "labels", "rollback_config"):
        if key in deploy and not (key == "mode" and deploy[key] == "replicated"):
            ctx.note(join(path, key), "is a Swarm setting without an equivalent in a one-node project: left out")
    for key in (k for k in deploy.get("update_config") or {} if k != "order"):  # order: spec.update.order
        ctx.note(join(path, f"update_config.{key}"), "has no equivalent for a single project: left out")
    restart_policy = deploy.get("restart_policy") or {}
    for key in ("delay", "max_attempts", "window"):
        if key in restart_policy:
            ctx.note(join(path, f"restart_policy.{key}"), "has no equivalent: the agent's backoff applies")
    placement = deploy.get("placement") or {}
    for index, constraint in enumerate(placement.get("constraints") or []):
        key, found, value = str(constraint).replace(" ", "").partition("==")
        if found and key.startswith("node.labels."):
            node_selector[key.removeprefix("node.labels.")] = value
        else:
            where = join(join(path, "placement.constraints"), index)
            ctx.note(where, "only node.labels.KEY==VALUE has an equivalent (spec.nodeSelector): left out")
    for key in ("preferences", "max_replicas_per_node"):
        if key in placement:
            ctx.note(join(path, f"placement.{key}"), "has no equivalent: left out")


def _networks_notes(data: dict[str, Any], ctx: Context) -> None:
    for name in data.get("networks") or {}:
        if name != "default":
            ctx.note(
                join("networks", name),
                "is not made: the services of a project share one network and reach each other by service name",
            )


def _secrets_notes(data: dict[str, Any], project: str, ctx: Context) -> None:
    for name, secret in (data.get("secrets") or {}).items():
        origin = secret.get("file") or (f"${secret['environment']}" if secret.get("environment") else "")
        origin = f"not read from {origin}: " if origin else ""
        ctx.note(
            join("secrets", name),
            f"{origin}create Secret {project}-secrets with the key {name} (its content) before applying; "
            f"services read {'/run/secrets'}/{name} as in Compose",
        )
    for name, config in (data.get("configs") or {}).items():
        origin = config.get("file") or ("its content" if "content" in config else "")
        ctx.note(
            join("configs", name),
            f"not converted: make a Config of {origin or 'the file'} (caractrl apply -f a Config manifest) and mount "
            "it with a Config volume (a directory with one file per key)",
        )


__all__ = [
    "COMPOSE_FILE_NAMES",
    "Conversion",
    "convert_file",
    "convert_text",
    "find_compose_file",
    "is_compose",
    "looks_like_compose",
]
