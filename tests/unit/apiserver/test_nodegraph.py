"""The node authorizer's graph: a node reads the Secrets, Configs and BackupRepositories its bound projects
reference, and the Secrets of those repositories, as of the projects' and repositories' revisions."""

from __future__ import annotations

from typing import Any

from caravanserai import v1
from caravanserai.apiserver.kinds.nodegraph import NodeGraph, over


def bound(name: str, node: str, *, secret: str = "", config: str = "", pull: str = "") -> v1.Project:
    p = v1.Project(metadata=v1.ObjectMeta(name=name))
    p.status.node_ref = node
    service = p.spec.services.add(name="s", image="i")
    if secret:
        service.env.add(name="A", value_from=v1.KeyRef(secret=secret, key="k"))
    if config:
        service.env_from.add(config=config)
    if pull:
        p.spec.image_pull_secrets.append(pull)
    return p


def test_a_node_reads_what_its_projects_reference() -> None:
    projects = [bound("a", "n1", secret="s1", config="c1", pull="reg"), bound("b", "n2", secret="s2")]
    revision = [1]
    graph = NodeGraph(lambda: projects, lambda: revision[0])
    assert graph.readable("n1", "secrets") == {"s1", "reg"}
    assert graph.readable("n1", "configs") == {"c1"}
    assert not graph.allows("n1", "secrets", "s2") and graph.allows("n2", "secrets", "s2")
    projects[1].status.node_ref = "n1"  # moved: seen once the projects' revision moves
    assert not graph.allows("n1", "secrets", "s2")
    revision[0] = 2
    assert graph.allows("n1", "secrets", "s2") and not graph.allows("n2", "secrets", "s2")


def backed_up(name: str, node: str, *repositories: str) -> v1.Project:
    """A project bound to `node` whose Persistent volumes back up into `repositories`."""
    p = bound(name, node)
    for i, repository in enumerate(repositories):
        volume = p.spec.volumes.add(name=f"v{i}", type=v1.VOLUME_PERSISTENT)
        volume.backup.repository = repository
    p.spec.volumes.add(name="plain", type=v1.VOLUME_PERSISTENT)  # no backup: names no repository
    return p


def test_a_node_reads_its_projects_repositories_and_through_them_their_secrets() -> None:
    projects = [backed_up("wiki", "n1", "offsite", "local"), backed_up("shop", "n2", "shared")]
    secrets = {"offsite": "restic-offsite", "local": "restic-local", "shared": "restic-shared"}
    revision = [(1, 1)]
    graph = NodeGraph(lambda: projects, lambda: revision[0], repository_secret=lambda n: secrets.get(n, ""))
    assert graph.readable("n1", "backuprepositories") == {"offsite", "local"}
    assert graph.readable("n1", "secrets") == {"restic-offsite", "restic-local"}
    assert graph.readable("n2", "secrets") == {"restic-shared"}
    assert graph.readable("n1", "configs") == set()
    # The repository's Secret changes: the old one is no longer readable, at the repositories' next revision.
    secrets["offsite"] = "restic-rotated"
    assert graph.allows("n1", "secrets", "restic-offsite")  # same revisions: the answer is cached
    revision[0] = (1, 2)
    assert graph.allows("n1", "secrets", "restic-rotated") and not graph.allows("n1", "secrets", "restic-offsite")
    # A repository not created yet names no Secret; the project leaving takes every access with it.
    del secrets["local"]
    projects[0].status.node_ref = ""
    revision[0] = (2, 3)
    assert graph.readable("n1", "secrets") == set() and graph.readable("n1", "backuprepositories") == set()


def test_over_follows_the_projects_and_repositories_caches() -> None:
    class Cache:
        def __init__(self, objects: dict[str, Any]) -> None:
            self.objects = objects
            self.revision = 1

        def keys_where(self, field: str, value: str) -> list[str]:
            assert field == "status.nodeRef"
            return [key for key, obj in self.objects.items() if obj.status.node_ref == value]

    repo = v1.BackupRepository(metadata=v1.ObjectMeta(name="offsite"), spec=v1.BackupRepositorySpec(secret="pw"))
    projects = Cache({"wiki": backed_up("wiki", "n1", "offsite", "missing")})
    repositories = Cache({"offsite": repo})
    graph = over({"projects": projects, "backuprepositories": repositories})  # type: ignore[dict-item]  # fakes standing in for the readers
    assert graph.readable("n1", "secrets") == {"pw"}
    changed = v1.BackupRepository()
    changed.CopyFrom(repo)
    changed.spec.secret = "pw2"
    repositories.objects = {"offsite": changed}  # the cache replaces its dict on a relist
    repositories.revision = 2
    assert graph.readable("n1", "secrets") == {"pw2"}
    without = over({"projects": projects})  # type: ignore[dict-item]  # fakes standing in for the readers
    assert without.readable("n1", "secrets") == set() and without.readable("n1", "backuprepositories") == {
        "missing",
        "offsite",
    }
