"""Registry credentials from `RegistryAuth` Secrets, and which registry an image comes from.

A RegistryAuth Secret holds either three keys, `registry` (host[:port]), `username` and `password`, or one key
`.dockerconfigjson` with a Docker config JSON (`{"auths": {"<registry>": {"username": …, "password": …}}` or
`{"auth": base64("user:password")}`). `credentials` reads both forms; `registry_of` finds an image's registry
the way Docker does (the first path component when it has a `.` or `:` or is `localhost`, else `docker.io`).

Guarantees: pure; every refusal is a `ValueError` naming the key, never quoting a secret value.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
DOCKER_CONFIG_KEY = ".dockerconfigjson"
FIELDS = ("registry", "username", "password")
_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io", "https://index.docker.io/v1/")


@dataclass(frozen=True, slots=True)
class RegistryCredential:
    """Credentials for one registry (host[:port], normalized: no scheme, no path)."""

    registry: str
    username: str
    password: str = ""

    def __repr__(self) -> str:  # never print the password
        return f"RegistryCredential(registry={self.registry!r}, username={self.username!r})"


def normalize(registry: str) -> str:
    """`https://host:5000/v1/` → `host:5000`; Docker Hub's aliases → `docker.io`."""
    if registry in _HUB_ALIASES:
        return DOCKER_HUB
    host = registry.split("://", 1)[-1].split("/", 1)[0]
    return DOCKER_HUB if host in _HUB_ALIASES else host


def registry_of(image: str) -> str:
    """The registry an image reference is pulled from (`127.0.0.1:5000/app:1` → `127.0.0.1:5000`,
    `nginx:1.27` → `docker.io`)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB


def _text(data: Mapping[str, bytes], key: str) -> str:
    try:
        return data[key].decode()
    except UnicodeDecodeError:
        raise ValueError(f"{key}: must be UTF-8 text") from None


def _from_config(raw: bytes) -> list[RegistryCredential]:
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{DOCKER_CONFIG_KEY}: must be a Docker config JSON document") from None
    auths = document.get("auths") if isinstance(document, dict) else None
    if not isinstance(auths, dict) or not auths:
        raise ValueError(f'{DOCKER_CONFIG_KEY}: must hold a non-empty "auths" mapping')
    found = []
    for registry, entry in auths.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{DOCKER_CONFIG_KEY}: auths entry of {registry} must be a mapping")
        username, password = entry.get("username"), entry.get("password")
        if "auth" in entry and not (username and password):
            try:
                username, _, password = base64.b64decode(str(entry["auth"]), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise ValueError(
                    f'{DOCKER_CONFIG_KEY}: the "auth" of {registry} must be base64 of user:password'
                ) from None
        if not isinstance(username, str) or not isinstance(password, str) or not username:
            raise ValueError(f"{DOCKER_CONFIG_KEY}: the entry of {registry} needs a username and a password")
        found.append(RegistryCredential(normalize(registry), username, password))
    return found


def credentials(data: Mapping[str, bytes]) -> list[RegistryCredential]:
    """The credentials a RegistryAuth Secret's data holds (see the module docstring); ValueError otherwise."""
    if DOCKER_CONFIG_KEY in data:
        extra = sorted(set(data) - {DOCKER_CONFIG_KEY})
        if extra:
            raise ValueError(f"{extra[0]}: not allowed next to {DOCKER_CONFIG_KEY}")
        return _from_config(data[DOCKER_CONFIG_KEY])
    missing = [key for key in FIELDS if not data.get(key)]
    if missing:
        raise ValueError(f"{missing[0]}: is required (keys registry, username, password, or {DOCKER_CONFIG_KEY})")
    extra = sorted(set(data) - set(FIELDS))
    if extra:
        raise ValueError(f"{extra[0]}: unknown key (allowed: registry, username, password)")
    return [RegistryCredential(normalize(_text(data, "registry")), _text(data, "username"), _text(data, "password"))]


def for_image(image: str, found: list[RegistryCredential]) -> RegistryCredential | None:
    """The first credential for the registry `image` comes from, or None."""
    registry = registry_of(image)
    return next((c for c in found if c.registry == registry), None)


__all__ = [
    "DOCKER_CONFIG_KEY",
    "DOCKER_HUB",
    "RegistryCredential",
    "credentials",
    "for_image",
    "normalize",
    "registry_of",
]
