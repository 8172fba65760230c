"""`project.datarefs`, the one reading of what a project names: BackupRepositories of backed-up volumes count for
the project as a whole (the node authorizer, the agent's backups), never for one service's data."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.project import datarefs


def spec() -> v1.ProjectSpec:
    out = v1.ProjectSpec()
    web = out.services.add(name="web", image="wiki:1")
    web.volume_mounts.add(name="data", mount_path="/data")
    web.env.add(name="PW", value_from=v1.KeyRef(secret="db", key="pw"))
    for name, repository in (("data", "offsite"), ("logs", "offsite"), ("media", "local")):
        volume = out.volumes.add(name=name, type=v1.VOLUME_PERSISTENT)
        volume.backup.repository = repository
    out.volumes.add(name="plain", type=v1.VOLUME_PERSISTENT)
    scratch = out.volumes.add(name="scratch")  # refused by the apiserver; never a repository reference
    scratch.backup.repository = "ignored"
    return out


def test_a_project_references_the_repositories_of_its_backed_up_volumes() -> None:
    refs = datarefs.project_refs(spec())
    assert refs.repositories == ("local", "offsite")  # sorted, once each
    assert refs.names(datarefs.REPOSITORIES) == refs.repositories
    assert refs.secrets == ("db",)  # a repository's Secret is not the spec's reference: the node graph follows it
    assert datarefs.references(spec(), "backuprepositories", "offsite")
    assert not datarefs.references(spec(), "backuprepositories", "ignored")
    assert not datarefs.references(spec(), "secrets", "offsite")
    assert datarefs.project_refs(spec()).names("nodes") == ()


def test_a_service_never_references_a_repository() -> None:
    s = spec()
    refs = datarefs.service_refs(s.services[0], s)
    assert refs == datarefs.DataRefs(secrets=("db",))
    only_backups = v1.ProjectSpec()
    only_backups.CopyFrom(s)
    del only_backups.services[0].env[:]
    assert not datarefs.service_refs(only_backups.services[0], only_backups)  # nothing for the spec hash
    assert datarefs.project_refs(only_backups)  # but the project still reads its repositories
