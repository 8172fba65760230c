"""A service's `volumes:`, `tmpfs:`, `secrets:` and `configs:` to volume mounts, tmpfs mounts and project volumes.

* A named volume (declared under the top-level `volumes:`) is a **Persistent** volume: Compose keeps named volumes
  across `down` and `up`, and so does a Project's Persistent volume across deletion and re-creation.
* An anonymous volume (`- /var/lib/data`) is an **Ephemeral** volume of its own, removed with the project.
* A bind mount (`./data:/data`, `/srv/x:/x`, `type: bind`) is a **HostPath** volume, its path made absolute from the
  Compose file's folder; one volume per host path, shared by the services that mount it. Only an admin may apply it
  (or a node's allow-list of host paths admits it), since it reaches the node's files.
* `tmpfs:` and `type: tmpfs` are tmpfs mounts (size and mode kept).
* Secrets: a Project reads Secrets from the cluster, never from files. Every secret a service lists becomes a key
  of one Secret, `<project>-secrets`, mounted read-only at `/run/secrets` (so `/run/secrets/<name>` is where Compose
  puts it); a line says to create that Secret. Configs: a line says how to make a Config of the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from caravanserai import v1
from caravanserai.compose.context import Context
from caravanserai.compose.names import dns_label
from caravanserai.compose.problems import join
from caravanserai.compose.units import boolean, integer, size

SECRETS_PATH = "/run/secrets"
"""Where Compose puts a service's secrets, and where their Secret volume is mounted."""

_SHORT_OPTIONS = {"ro", "rw", "z", "Z", "cached", "delegated", "consistent", "nocopy"}


@dataclass
class Volumes:
    """The project's volumes as the services declare them: names given once, host paths shared."""

    project: str
    declared: dict[str, dict[str, Any]]
    """The top-level `volumes:` of the Compose file (name → its settings)."""
    volumes: dict[str, v1.Volume] = field(default_factory=dict)
    by_host_path: dict[str, str] = field(default_factory=dict)

    def _unique(self, wanted: str) -> str:
        name, counter = wanted or "volume", 2
        while name in self.volumes:
            name, counter = f"{wanted}-{counter}", counter + 1
        return name

    def named(self, compose_name: str, ctx: Context, path: str) -> str:
        if compose_name not in self.declared:
            raise ctx.error(path, f"volume {compose_name!r} is not declared under the top-level volumes:")
        name = dns_label(compose_name)
        if not name:
            raise ctx.error(path, f"volume name {compose_name!r} has no letter or digit to make a name of")
        if name not in self.volumes:
            self.volumes[name] = v1.Volume(name=name, type="Persistent")
        elif self.volumes[name].type != "Persistent":
            raise ctx.error(path, f"volume name {name!r} is taken by the project's {self.volumes[name].type} volume")
        return name

    def anonymous(self, service: str) -> str:
        name = self._unique(f"{service}-data")
        self.volumes[name] = v1.Volume(name=name, type="Ephemeral")
        return name

    def host(self, host_path: str) -> str:
        if host_path not in self.by_host_path:
            name = self._unique(dns_label(host_path.rsplit("/", 1)[-1]) or "host")
            self.volumes[name] = v1.Volume(name=name, type="HostPath", host_path=host_path)
            self.by_host_path[host_path] = name
        return self.by_host_path[host_path]


def _short(entry: str, service: str, vols: Volumes, ctx: Context, path: str) -> v1.VolumeMount:
    parts = entry.split(":")
    options: set[str] = set()
    if len(parts) > 1 and set(parts[-1].split(",")) <= _SHORT_OPTIONS:
        options = set(parts.pop().split(","))
    if len(parts) == 1:
        source, target = "", parts[0]
    elif len(parts) == 2:
        source, target = parts
    else:
        raise ctx.error(path, f"is not a volume mapping: {entry!r} (SOURCE:TARGET[:ro])")
    for option in sorted(options - {"ro", "rw"}):
        ctx.note(path, f"mount option {option} has no equivalent: left out")
    return _mount(source, target, "ro" in options, service, vols, ctx, path)


def _mount(
    source: str, target: str, read_only: bool, service: str, vols: Volumes, ctx: Context, path: str
) -> v1.VolumeMount:
    if not target.startswith("/"):
        raise ctx.error(path, f"the path in the container must be absolute, not {target!r}")
    if not source:
        name = vols.anonymous(service)
    elif source.startswith((".", "/", "~")):
        name = vols.host(ctx.host_path(source))
    else:
        name = vols.named(source, ctx, path)
    return v1.VolumeMount(name=name, mount_path=target, read_only=read_only)


def _long(
    entry: dict[str, Any], service: str, vols: Volumes, ctx: Context, path: str
) -> v1.VolumeMount | v1.TmpfsMount:
    kind, source, target = entry.get("type"), str(entry.get("source", "")), str(entry.get("target", ""))
    for key in ("consistency", "bind", "volume", "image"):
        if entry.get(key):
            ctx.note(join(path, key), "has no equivalent: left out")
    if kind == "tmpfs":
        return _tmpfs(target, entry.get("tmpfs") or {}, ctx, path, join(path, "tmpfs"))
    if kind not in ("volume", "bind"):
        raise ctx.error(join(path, "type"), f"a {kind} mount has no equivalent (volume, bind and tmpfs do)")
    if kind == "bind" and not source:
        raise ctx.error(join(path, "source"), "is required for a bind mount (the host path)")
    if kind == "bind":
        source = source if source.startswith((".", "/", "~")) else "./" + source
    read_only = boolean(entry.get("read_only", False))
    return _mount(source, target, read_only, service, vols, ctx, path)


def _tmpfs(target: str, settings: dict[str, Any], ctx: Context, path: str, settings_path: str) -> v1.TmpfsMount:
    if not target.startswith("/"):
        raise ctx.error(path, f"the path in the container must be absolute, not {target!r}")
    mount = v1.TmpfsMount(mount_path=target)
    try:
        if "size" in settings:
            mount.size = size(settings["size"])
        if "mode" in settings:
            mount.mode = _octal(settings["mode"])
    except ValueError as exc:
        raise ctx.error(settings_path, str(exc)) from None
    return mount


def _octal(value: object) -> int:
    """A file mode: a string is octal (`"1777"`, `"0o755"`); a YAML number is taken as written in octal digits."""
    text = str(integer(value)) if isinstance(value, (int, float)) else str(value).strip()
    try:
        return int(text.removeprefix("0o").removeprefix("0O") or "0", 8)
    except ValueError:
        raise ValueError(f"is not an octal file mode: {value!r}") from None


def tmpfs_short(entry: str, ctx: Context, path: str) -> v1.TmpfsMount:
    """`/run` or `/run:size=64m,mode=1777` (the options Docker's --tmpfs takes; others are said and left out)."""
    target, _, options = entry.partition(":")
    settings: dict[str, Any] = {}
    for option in filter(None, options.split(",")):
        key, _, value = option.partition("=")
        if key in ("size", "mode"):
            settings[key] = value
        else:
            ctx.note(path, f"tmpfs option {option} has no equivalent: left out")
    return _tmpfs(target, settings, ctx, path, path)


def convert_mounts(
    service: dict[str, Any], name: str, vols: Volumes, ctx: Context, path: str
) -> tuple[list[v1.VolumeMount], list[v1.TmpfsMount]]:
    """The service's volume mounts and tmpfs mounts (`volumes:` then `tmpfs:`)."""
    mounts: list[v1.VolumeMount] = []
    tmpfs: list[v1.TmpfsMount] = []
    for index, entry in enumerate(service.get("volumes") or []):
        where = join(join(path, "volumes"), index)
        found = (
            _long(entry, name, vols, ctx, where)
            if isinstance(entry, dict)
            else _short(str(entry), name, vols, ctx, where)
        )
        if isinstance(found, v1.TmpfsMount):
            tmpfs.append(found)
        else:
            mounts.append(found)
    entries = service.get("tmpfs") or []
    for index, entry in enumerate([entries] if isinstance(entries, str) else entries):
        tmpfs.append(tmpfs_short(entry, ctx, join(join(path, "tmpfs"), index)))
    return mounts, tmpfs


def declared_volume_notes(declared: dict[str, Any], ctx: Context) -> None:
    """A line for each top-level volume setting without an equivalent."""
    for name, settings in declared.items():
        for key in sorted((settings or {}).keys()):
            where = join(join("volumes", name), key)
            if key == "external" and settings[key] not in (False, "false"):
                ctx.note(where, "an existing Docker volume is not adopted: a new Persistent volume is made")
            elif key in ("driver", "driver_opts", "labels", "name"):
                ctx.note(where, "has no equivalent (volumes use Docker's local driver): left out")


SECRETS_VOLUME = "secrets"
"""The name of the volume of the project's one Secret (reserved before any other volume is named)."""


def secrets_volume(project: str) -> v1.Volume:
    """The volume of the project's one Secret holding every Compose secret."""
    return v1.Volume(name=SECRETS_VOLUME, type="Secret", secret=f"{project}-secrets")


def convert_secrets(service: dict[str, Any], ctx: Context, path: str, project: str) -> v1.VolumeMount | None:
    """The mount of `/run/secrets` when the service lists secrets; a line for a target or mode not kept."""
    listed = service.get("secrets") or []
    for index, entry in enumerate(listed):
        if isinstance(entry, dict):
            for key in ("target", "uid", "gid", "mode"):
                if key in entry and not (key == "target" and str(entry[key]) in (str(entry.get("source")), "")):
                    ctx.note(
                        join(join(join(path, "secrets"), index), key),
                        f"secrets are files {SECRETS_PATH}/<name> of Secret {project}-secrets: {key} is left out",
                    )
    if not listed:
        return None
    return v1.VolumeMount(name=SECRETS_VOLUME, mount_path=SECRETS_PATH, read_only=True)


__all__ = [
    "SECRETS_PATH",
    "SECRETS_VOLUME",
    "Volumes",
    "convert_mounts",
    "convert_secrets",
    "declared_volume_notes",
    "secrets_volume",
]
