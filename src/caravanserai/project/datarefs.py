"""Which Secrets, Configs and BackupRepositories a project uses: the one reading of `env[].valueFrom`, `envFrom`,
data volumes, `imagePullSecrets` and volume backups, shared by validation, the apiserver's node authorizer, the
agent and the CLI.

Guarantees:

* **Complete.** Every place of a project spec that names a Secret, a Config or a BackupRepository is looked at here
  (the backed-up volumes through `caravanserai.project.backups`, their one reading) and nowhere else, so what the
  node authorizer lets a node read is exactly what its agent needs. The Secret a repository names is not a
  reference of the project's spec: the node authorizer adds it (`apiserver.kinds.nodegraph`), following the
  repository object.
* **Per service.** `service_refs` says what one service needs (its env and the data volumes it mounts; never a
  repository, which the agent reads for backups, not for a service); a change of exactly those objects changes
  that service's spec hash, and nothing else's.
* **In the project's namespace.** Refs are names; every one of them names an object of the project's own namespace
  (readers look it up as `meta.join_key(project.metadata.namespace, name)`, and so does a repository's Secret).
* Pure; refs are sorted, deduplicated tuples.
"""

from __future__ import annotations

from dataclasses import dataclass

from caravanserai import v1
from caravanserai.project import backups

SECRETS = "secrets"
CONFIGS = "configs"
REPOSITORIES = "backuprepositories"


@dataclass(frozen=True, slots=True)
class DataRefs:
    """Names of Secrets, Configs and BackupRepositories, sorted."""

    secrets: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    repositories: tuple[str, ...] = ()

    def names(self, resource: str) -> tuple[str, ...]:
        """The names for `resource` ("secrets", "configs" or "backuprepositories"; any other: none)."""
        by_resource = {SECRETS: self.secrets, CONFIGS: self.configs, REPOSITORIES: self.repositories}
        return by_resource.get(resource, ())

    def __bool__(self) -> bool:
        return bool(self.secrets or self.configs or self.repositories)


def _refs(secrets: set[str], configs: set[str], repositories: tuple[str, ...] = ()) -> DataRefs:
    return DataRefs(tuple(sorted(secrets - {""})), tuple(sorted(configs - {""})), repositories)


def service_refs(service: v1.Service, spec: v1.ProjectSpec) -> DataRefs:
    """What `service` of a project with `spec` reads: env sources and the data volumes it mounts."""
    secrets: set[str] = set()
    configs: set[str] = set()
    for env in service.env:
        if env.HasField("value_from"):
            secrets.add(env.value_from.secret)
            configs.add(env.value_from.config)
    for source in service.env_from:
        secrets.add(source.secret)
        configs.add(source.config)
    mounted = {mount.name for mount in service.volume_mounts}
    for volume in spec.volumes:
        if volume.name in mounted:
            if volume.type == v1.VOLUME_SECRET:
                secrets.add(volume.secret)
            elif volume.type == v1.VOLUME_CONFIG:
                configs.add(volume.config)
    return _refs(secrets, configs)


def project_refs(spec: v1.ProjectSpec) -> DataRefs:
    """Everything a project reads: every service's refs, its image pull secrets and the repositories of its
    backed-up volumes."""
    secrets = set(spec.image_pull_secrets)
    configs: set[str] = set()
    for service in spec.services:
        refs = service_refs(service, spec)
        secrets.update(refs.secrets)
        configs.update(refs.configs)
    for volume in spec.volumes:  # declared but unmounted data volumes are read too (validated, never materialized)
        if volume.type == v1.VOLUME_SECRET:
            secrets.add(volume.secret)
        elif volume.type == v1.VOLUME_CONFIG:
            configs.add(volume.config)
    return _refs(secrets, configs, backups.repositories(spec))


def references(spec: v1.ProjectSpec, resource: str, name: str) -> bool:
    """Does a project with `spec` read `name` of `resource` ("secrets", "configs" or "backuprepositories")?"""
    return name in project_refs(spec).names(resource)


__all__ = ["CONFIGS", "REPOSITORIES", "SECRETS", "DataRefs", "project_refs", "references", "service_refs"]
