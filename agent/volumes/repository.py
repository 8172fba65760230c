"""Which restic repository a volume backs up to, and the credentials that open it: a BackupRepository and its
Secret, read through the API with the node's own client.

    repository = await RepositoryResolver(client).resolve("offsite", namespace="default")

Guarantees:

* **Read afresh** on every `resolve`: a fixed Secret or URL is used by the next backup or restore.
* **Credentials stay in memory.** The Secret's keys become `Repository.env` (restic's environment, see
  `restic.environment`); `Repository`'s repr leaves them out, so a logged repository never shows them.
* **Clear refusals** (`ResticError` of kind `REPOSITORY`, one line): a missing BackupRepository, a repository
  without a Secret, a missing or unreadable Secret, a Secret without `RESTIC_PASSWORD` or with a value that is
  not text. An API that does not answer raises the client's own error (the caller retries later).
* `uses_secret` answers from the repositories resolved so far which of them a Secret opens (so that a fixed
  Secret wakes the projects that wait for it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.agent.volumes.resticerrors import REPOSITORY, ResticError
from caravanserai.client import Client
from caravanserai.errors import Forbidden, NotFound

PASSWORD_KEY = "RESTIC_PASSWORD"


@dataclass(frozen=True, slots=True)
class Repository:
    """A usable restic repository: its BackupRepository's name, restic URL, environment and whether an agent may
    initialise it."""

    name: str
    url: str
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    initialize: bool = False


class RepositoryResolver:
    """Reads BackupRepositories and their Secrets through `client` (see the module docstring)."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._secrets: dict[str, str] = {}  # repository key → the key of the Secret it named when last resolved

    async def resolve(self, name: str, *, namespace: str) -> Repository:
        """The repository `name` of `namespace` (the namespace of the project that names it) with its credentials,
        its Secret read in the same namespace; `ResticError` (kind REPOSITORY) when it cannot be used."""
        namespace = namespace or meta.DEFAULT_NAMESPACE
        try:
            found = await self._client.resource(v1.BackupRepository).get(meta.join_key(namespace, name))
        except NotFound:
            raise ResticError(REPOSITORY, f"BackupRepository {name} not found") from None
        except Forbidden as exc:
            raise ResticError(REPOSITORY, f"BackupRepository {name} cannot be read by this node: {exc}") from None
        spec = found.spec
        if not spec.secret:
            raise ResticError(REPOSITORY, f"BackupRepository {name} names no Secret (spec.secret)")
        self._secrets[meta.join_key(namespace, name)] = meta.join_key(namespace, spec.secret)
        env = await self._environment(name, meta.join_key(namespace, spec.secret))
        return Repository(name=name, url=spec.url, env=env, initialize=spec.initialize)

    async def _environment(self, repository: str, secret_key: str) -> dict[str, str]:
        where = f"Secret {meta.split_key(secret_key)[1]} of BackupRepository {repository}"
        try:
            secret = await self._client.secrets.get(secret_key)
        except NotFound:
            raise ResticError(REPOSITORY, f"{where} not found") from None
        except Forbidden as exc:
            raise ResticError(REPOSITORY, f"{where} cannot be read by this node: {exc}") from None
        return environment_of(secret, where=where)

    def uses_secret(self, namespace: str, repositories: Iterable[str], secret: str) -> bool:
        """Whether one of `repositories` (names) of `namespace` named Secret `secret` (of the same namespace) when
        last resolved."""
        namespace = namespace or meta.DEFAULT_NAMESPACE
        wanted = meta.join_key(namespace, secret)
        return any(self._secrets.get(meta.join_key(namespace, name)) == wanted for name in repositories)


def environment_of(secret: v1.Secret, *, where: str) -> dict[str, str]:
    """The Secret's keys as restic's environment; `ResticError` without RESTIC_PASSWORD or with binary values."""
    env: dict[str, str] = {}
    for key, value in secret.spec.data.items():
        try:
            env[key] = value.decode("utf-8")
        except UnicodeDecodeError:
            raise ResticError(REPOSITORY, f"{where}: key {key} is not text") from None
    if not env.get(PASSWORD_KEY):
        raise ResticError(REPOSITORY, f"{where} has no {PASSWORD_KEY}")
    return env


__all__ = ["PASSWORD_KEY", "Repository", "RepositoryResolver", "environment_of"]
