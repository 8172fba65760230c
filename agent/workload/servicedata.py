"""What a project's services take from Secrets and Configs, read from the API server for each reconcile.

`ServiceData.inputs(project)` reads every Secret and Config the project references (`caravanserai.project.datarefs`;
the node authorizer lets this node read exactly those while the project is bound here) and returns, per service,
its environment with `envFrom` and `valueFrom` resolved, its data volumes written as files (`datafiles`) and the
digest of everything it read.

Guarantees:

* **Exactly what a service reads is in its digest**: the values of the keys it takes as environment variables and
  the files (with their mode) of the data volumes it mounts. Another key of the same Secret changing, or a
  metadata-only write (such as a re-encryption), changes nothing.
* **Missing data blocks only its readers**: a service whose Secret, Config or key is missing (or not readable) is
  returned in `blocked` with what it waits for (e.g. `secret "db" (not found)`); the others start. Values are
  never put into messages, logs or Events.
* **Environment order**: `envFrom` sources in order (later ones win), then `env` (which wins over them).
* **Registry credentials**: each service's image gets the credentials of the project's `imagePullSecrets` for its
  registry (`ServiceInputs.auth`), never part of the digest.
* Secret values taken as environment variables must be UTF-8 text (a service reading a binary value is blocked
  with a message saying so); files take any bytes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.containers import ProjectInputs, ServiceInputs
from caravanserai.agent.workload.datafiles import DataFiles, default_mode
from caravanserai.client import Client
from caravanserai.errors import Forbidden, NotFound
from caravanserai.project import datarefs, registryauth
from caravanserai.text.violations import quote

Data = Mapping[str, bytes]


class Blocked(Exception):
    """A service cannot start yet: data it reads is missing. The message says what it waits for."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """The data of the referenced objects that could be read, and why the others could not."""

    secrets: dict[str, Data]
    configs: dict[str, Data]
    missing: dict[tuple[str, str], str]  # (resource, name) → reason

    def data(self, resource: str, name: str) -> Data:
        found = (self.secrets if resource == datarefs.SECRETS else self.configs).get(name)
        if found is None:
            raise Blocked(f"{resource[:-1]} {quote(name)} ({self.missing.get((resource, name), 'not found')})")
        return found

    def value(self, resource: str, name: str, key: str) -> bytes:
        data = self.data(resource, name)
        if key not in data:
            raise Blocked(f"key {quote(key)} of {resource[:-1]} {quote(name)}")
        return data[key]


class ServiceData:
    """Resolves the Secrets and Configs of projects for the agent of one node."""

    def __init__(self, client: Client, files: DataFiles) -> None:
        self._client = client
        self.files = files

    async def fetch(self, project: v1.Project) -> Fetched:
        """Every Secret and Config the project references that can be read now."""
        refs = datarefs.project_refs(project.spec)
        fetched = Fetched({}, {}, {})
        names = [(datarefs.SECRETS, n) for n in refs.secrets] + [(datarefs.CONFIGS, n) for n in refs.configs]
        namespace = project.metadata.namespace or meta.DEFAULT_NAMESPACE  # references resolve in the project's
        gets = (self._get(resource, meta.join_key(namespace, name)) for resource, name in names)
        results = await asyncio.gather(*gets, return_exceptions=True)
        for (resource, name), result in zip(names, results, strict=True):
            if isinstance(result, (NotFound, Forbidden)):
                fetched.missing[(resource, name)] = "not found" if isinstance(result, NotFound) else "not readable"
            elif isinstance(result, BaseException):
                raise result
            else:
                (fetched.secrets if resource == datarefs.SECRETS else fetched.configs)[name] = result
        return fetched

    async def _get(self, resource: str, key: str) -> Data:
        if resource == datarefs.SECRETS:
            return dict((await self._client.secrets.get(key)).spec.data)
        return {k: v.encode() for k, v in (await self._client.configs.get(key)).spec.data.items()}

    async def inputs(self, project: v1.Project, fetched: Fetched | None = None) -> ProjectInputs:
        """The inputs of every service of `project` that reads Secrets or Configs, and the blocked ones."""
        fetched = fetched or await self.fetch(project)
        credentials = registry_credentials(project.spec, fetched)
        services: dict[str, ServiceInputs] = {}
        blocked: dict[str, str] = {}
        for service in project.spec.services:
            auth = registryauth.for_image(service.image, credentials)
            try:
                if datarefs.service_refs(service, project.spec):
                    services[service.name] = dataclasses.replace(self._service(project, service, fetched), auth=auth)
                elif auth is not None:
                    services[service.name] = dataclasses.replace(ServiceInputs.literal(service), auth=auth)
            except Blocked as exc:
                blocked[service.name] = str(exc)
        return ProjectInputs(services, blocked)

    def _service(self, project: v1.Project, service: v1.Service, fetched: Fetched) -> ServiceInputs:
        env: dict[str, str] = {}
        read: dict[str, str] = {}  # the values taken from data, for the digest
        for source in service.env_from:
            resource, name = _source(source.secret, source.config)
            for key, value in sorted(fetched.data(resource, name).items()):
                env[key] = read[key] = _text(value, resource, name, key)
        for var in service.env:
            if var.HasField("value_from"):
                resource, name = _source(var.value_from.secret, var.value_from.config)
                raw = fetched.value(resource, name, var.value_from.key)
                env[var.name] = read[var.name] = _text(raw, resource, name, var.value_from.key)
            else:
                env[var.name] = var.value
                read.pop(var.name, None)
        mounts, files = self._mounts(project, service, fetched)
        digest = hashlib.sha256(json.dumps({"env": read, "files": files}, sort_keys=True).encode()).hexdigest()
        return ServiceInputs(tuple(f"{k}={v}" for k, v in env.items()), tuple(mounts), digest[:16])

    def _mounts(
        self, project: v1.Project, service: v1.Service, fetched: Fetched
    ) -> tuple[list[tuple[str, str]], dict[str, str]]:
        volumes = {v.name: v for v in project.spec.volumes if v.type in (v1.VOLUME_SECRET, v1.VOLUME_CONFIG)}
        mounts: list[tuple[str, str]] = []
        written: dict[str, str] = {}
        for mount in service.volume_mounts:
            volume = volumes.get(mount.name)
            if volume is None:
                continue
            resource, name = _source(volume.secret, volume.config)
            owner = self.files.owner_for(service.user)
            data = fetched.data(resource, name)
            mode = volume.mode or default_mode(owner)
            path = self.files.write(naming.key_of(project), volume.name, data, mode=mode, owner=owner)
            mounts.append((path, mount.mount_path))
            written[mount.mount_path] = path
        return mounts, written


def registry_credentials(spec: v1.ProjectSpec, fetched: Fetched) -> list[registryauth.RegistryCredential]:
    """The credentials of the project's imagePullSecrets that could be read (a missing one is left out: the pull
    then goes without, and the registry's refusal says why)."""
    found: list[registryauth.RegistryCredential] = []
    for name in spec.image_pull_secrets:
        data = fetched.secrets.get(name)
        if data is None:
            continue
        try:
            found.extend(registryauth.credentials(data))
        except ValueError:
            continue  # not registry credentials (the apiserver checks RegistryAuth Secrets)
    return found


def _source(secret: str, config: str) -> tuple[str, str]:
    return (datarefs.SECRETS, secret) if secret else (datarefs.CONFIGS, config)


def _text(value: bytes, resource: str, name: str, key: str) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise Blocked(f"key {quote(key)} of {resource[:-1]} {quote(name)} to be UTF-8 text") from None


__all__ = ["Blocked", "Fetched", "ServiceData", "registry_credentials"]
