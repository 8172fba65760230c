"""Which Secrets, Configs and BackupRepositories each node may read: those referenced by a project bound to it
(Kubernetes' node authorizer, computed from the projects' and the repositories' watch caches).

Guarantees:

* **Bound projects only.** A project counts for node N while `status.nodeRef == N`; a project moved away (its
  old containers still running under a hand-off) does not, so a node loses access as soon as a project leaves.
* **What the project names** (`caravanserai.project.datarefs`, the one reading): its Secrets and Configs, the
  BackupRepositories its backed-up volumes use, and — two hops — the Secret each of those repositories names in
  `spec.secret` (as the repository is now, in its watch cache). A repository that does not exist yet adds no
  Secret; once it is created, or its `spec.secret` changes, the answer follows at the repositories' next revision.
* **As fresh as the caches.** The answer follows the apiserver's projects and repositories watch caches; a
  binding the cache has not seen yet is not counted (the agent, which learns of bindings through that cache too,
  retries).
* **Within the project's namespace.** A project's references name objects of its own namespace, so the answer
  is a set of keys "namespace/name".
* Read-only over the caches; one pass over the node's projects (found by index) per node, resource and pair of
  cache revisions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol

from caravanserai import meta, v1
from caravanserai.apiserver.kinds import backuprepository, project
from caravanserai.project import datarefs


def _no_repositories(name: str) -> str:
    return ""


class NodeGraph:
    """`allows(node, resource, key)`: does a project bound to `node` reference the object `key` ("namespace/name")
    of `resource`?

    `repository_secret(key)` is the `spec.secret` of the BackupRepository of `key` ("" when there is none). The keys a
    node may read are computed once per node, resource and `revision()` (a list of many Secrets costs one pass
    over the projects, not one per Secret); `revision()` must change whenever the projects or the repositories
    do."""

    def __init__(
        self,
        projects: Callable[[], Iterable[v1.Project]],
        revision: Callable[[], Hashable] = lambda: 0,
        *,
        repository_secret: Callable[[str], str] = _no_repositories,
        bound: Callable[[str], Iterable[v1.Project]] | None = None,
    ) -> None:
        self._projects = projects
        self._bound = bound  # the projects bound to a node, from an index (None: filter `projects()`)
        self._revision = revision
        self._repository_secret = repository_secret
        self._at: Hashable = object()  # no revision seen yet
        self._readable: dict[tuple[str, str], frozenset[str]] = {}

    def allows(self, node: str, resource: str, key: str) -> bool:
        return key in self.readable(node, resource)

    def readable(self, node: str, resource: str) -> frozenset[str]:
        """The keys of `resource` that projects bound to `node` reference (Secrets: with their repositories')."""
        revision = self._revision()
        if revision != self._at:
            self._at, self._readable = revision, {}
        names = self._readable.get((node, resource))
        if names is None:
            names = frozenset(self._names(node, resource))
            self._readable[(node, resource)] = names
        return names

    def _names(self, node: str, resource: str) -> Iterable[str]:
        for p in self._projects() if self._bound is None else self._bound(node):
            if p.status.node_ref != node:
                continue
            namespace = p.metadata.namespace
            refs = datarefs.project_refs(p.spec)
            yield from (meta.join_key(namespace, name) for name in refs.names(resource))
            if resource == datarefs.SECRETS:
                keys = (meta.join_key(namespace, repository) for repository in refs.repositories)
                secrets = (self._repository_secret(key) for key in keys)
                yield from (meta.join_key(namespace, secret) for secret in secrets if secret)


NODE_FIELD = "status.nodeRef"


class _Cache(Protocol):
    @property
    def objects(self) -> Mapping[str, Any]: ...

    @property
    def revision(self) -> int: ...

    def keys_where(self, field: str, value: str) -> Iterable[str]: ...


def over(caches: Mapping[str, _Cache]) -> NodeGraph:
    """The graph over the projects' and the backup repositories' watch caches among `caches` (watch caches by
    plural; without a repositories cache, repositories name no Secret). A node's projects are found through the
    projects cache's index of `status.nodeRef`, decoding only those."""
    projects = caches[project.KIND.plural]
    repositories = caches.get(backuprepository.KIND.plural)

    def bound(node: str) -> Iterable[v1.Project]:
        objects = projects.objects
        return (p for p in map(objects.get, projects.keys_where(NODE_FIELD, node)) if p is not None)

    if repositories is None:
        return NodeGraph(lambda: projects.objects.values(), lambda: projects.revision, bound=bound)
    found = repositories

    def secret_of(key: str) -> str:
        repository: v1.BackupRepository | None = found.objects.get(key)
        return repository.spec.secret if repository is not None else ""

    return NodeGraph(
        lambda: projects.objects.values(),
        lambda: (projects.revision, found.revision),
        repository_secret=secret_of,
        bound=bound,
    )


NO_GRAPH = NodeGraph(lambda: ())
"""A graph without projects: nodes read no referenced objects (an authorizer without a projects cache)."""

__all__ = ["NO_GRAPH", "NodeGraph", "over"]
