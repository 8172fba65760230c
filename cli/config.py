"""Where caractrl connects and how: flags, environment, the config file, defaults — in that order.

The config file is YAML at `$XDG_CONFIG_HOME/caravanserai/config.yaml` (default `~/.config/caravanserai/`),
or the file named by `--config` / `$CARA_CONFIG`:

    server: cara.example.org:7420
    token: s3cret
    namespace: team-a     # where names without a namespace go (`-n` wins; default "default")
    tls:
      ca: ca.pem          # relative paths are relative to the config file
      cert: client.pem
      key: client-key.pem

`caractrl config set-context --current --namespace=NS` writes `namespace` into that file (kubectl's way).
A default file that only names a namespace still lets caractrl use a local `cara up` cluster's credentials.
A missing default file is fine; a missing `--config` file, unknown keys or malformed YAML are errors.
The file is read only when a command connects, so `completion`, `schema` and `--help` never depend on it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from caravanserai import meta
from caravanserai.cli.localpki import admin_config_for
from caravanserai.client import Client, server_address
from caravanserai.process.tls import TLSFiles
from caravanserai.text import yamlerror
from caravanserai.text.selectors import validate_dns_label

OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "name")
# Per call deadline, and how long a failed (UNAVAILABLE) idempotent call is retried before giving up: short, so
# that a wrong --server is reported at once.
CALL_TIMEOUT = 30.0
RETRY_TIMEOUT = 1.0
_KEYS = {"namespace", "server", "token", "tls"}
_TLS_KEYS = {"ca", "cert", "key"}


class ConfigError(ValueError):
    """The config file or the TLS options are unusable."""


@dataclass(frozen=True, slots=True)
class FileConfig:
    """What the config file says (every key optional)."""

    server: str | None = None
    token: str | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    namespace: str | None = None

    def connects(self) -> bool:
        """Whether the file says how to connect (a server, a token or TLS files), not only a namespace."""
        return any((self.server, self.token, self.tls_ca, self.tls_cert, self.tls_key))


def default_config_path() -> Path:
    """`$XDG_CONFIG_HOME/caravanserai/config.yaml`, `~/.config/caravanserai/config.yaml` without it."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "caravanserai" / "config.yaml"


def load_config(path: Path | None) -> FileConfig:
    """Read the config file: `path` must exist when given; the default location may be absent."""
    explicit = path is not None
    path = path if path is not None else default_config_path()
    if not path.exists():
        if explicit:
            raise ConfigError(f"config file {path} does not exist")
        return FileConfig()
    try:
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except YAMLError as exc:
        raise ConfigError(f"config file {path}: {yamlerror.describe(exc)}") from None
    return _parse_config(path, data if data is not None else {})


def _parse_config(path: Path, data: Any) -> FileConfig:
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file {path}: expected a mapping of settings")
    unknown = sorted(set(map(str, data)) - _KEYS)
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown key(s) {', '.join(unknown)}; known: namespace, server, tls, token"
        )
    namespace = str(data["namespace"]) if data.get("namespace") else None
    problem = validate_dns_label(namespace) if namespace is not None else None
    if problem:
        raise ConfigError(f"config file {path}: namespace: {namespace!r}: {problem}")
    tls = data.get("tls") or {}
    if not isinstance(tls, Mapping) or set(map(str, tls)) - _TLS_KEYS:
        raise ConfigError(f"config file {path}: tls must be a mapping with keys ca, cert, key")

    def file_at(value: Any) -> Path | None:
        return None if not value else (path.parent / str(value)).expanduser()

    return FileConfig(
        server=str(data["server"]) if data.get("server") else None,
        token=str(data["token"]) if data.get("token") else None,
        tls_ca=file_at(tls.get("ca")),
        tls_cert=file_at(tls.get("cert")),
        tls_key=file_at(tls.get("key")),
        namespace=namespace,
    )


def channel_credentials(ca: Path | None, cert: Path | None, key: Path | None) -> grpc.ChannelCredentials | None:
    """TLS credentials when any of the files is given; None means a plaintext channel."""
    if ca is None and cert is None and key is None:
        return None
    if (cert is None) != (key is None):
        raise ConfigError("--tls-cert and --tls-key must be given together")
    return TLSFiles(cert=str(cert or ""), key=str(key or ""), ca=str(ca or "")).channel_credentials()


@dataclass
class Settings:
    """The global options of one caractrl invocation; `ctx.obj` of every command."""

    server: str | None = None
    output: str | None = None
    token: str | None = None
    config_path: Path | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    namespace: str | None = None  # `-n/--namespace` (or $CARA_NAMESPACE): None when not given
    all_namespaces: bool = False  # `-A/--all-namespaces`
    _file: FileConfig | None = field(default=None, repr=False)

    def file(self) -> FileConfig:
        """The config file, read once. Without `--config` and without a default config file, the client config of
        a running `cara up` cluster serving the API at the address asked for (its admin's credentials, readable
        by the user who started it): how caractrl reaches a local cluster by default."""
        if self._file is None:
            own = load_config(self.config_path)
            local = None if self.config_path is not None or own.connects() else self._local_cluster_config()
            self._file = own if local is None else replace(load_config(local), namespace=own.namespace)
        return self._file

    def _local_cluster_config(self) -> Path | None:
        if self.token or self.tls_ca or self.tls_cert or self.tls_key:
            return None
        return admin_config_for(server_address(self.server or os.environ.get("CARA_SERVER")))

    def default_namespace(self) -> str:
        """Where names without a namespace go: `-n`, else the config file's `namespace`, else "default"."""
        return self.namespace or self.file().namespace or meta.DEFAULT_NAMESPACE

    def address(self) -> str:
        """`--server`, else $CARA_SERVER, else the config file, else 127.0.0.1:7420."""
        explicit = self.server or os.environ.get("CARA_SERVER") or self.file().server
        return server_address(explicit)

    def credentials(self) -> grpc.ChannelCredentials | None:
        conf = self.file()
        return channel_credentials(
            self.tls_ca or conf.tls_ca, self.tls_cert or conf.tls_cert, self.tls_key or conf.tls_key
        )

    def bearer_token(self) -> str | None:
        return self.token or self.file().token

    def client(self) -> Client:
        """A new API client; use as `async with settings.client() as client:`."""
        client = Client(
            self.address(),
            credentials=self.credentials(),
            token=self.bearer_token(),
            timeout=CALL_TIMEOUT,
            retry_timeout=RETRY_TIMEOUT,
            namespace=self.default_namespace(),
        )
        client.without_certificate = self.without_certificate()
        return client

    def without_certificate(self) -> bool:
        """TLS with neither a client certificate nor a token: a server requiring certificates is said to want one."""
        conf = self.file()
        return bool(self.tls_ca or conf.tls_ca) and not (self.tls_cert or conf.tls_cert) and not self.bearer_token()

    def output_format(self, local: str | None, *, default: str = "table") -> str:
        """`-o` given after the subcommand wins over `-o` given before it."""
        return local or self.output or default


__all__ = [
    "CALL_TIMEOUT",
    "OUTPUT_FORMATS",
    "RETRY_TIMEOUT",
    "ConfigError",
    "FileConfig",
    "Settings",
    "channel_credentials",
    "default_config_path",
    "load_config",
]
