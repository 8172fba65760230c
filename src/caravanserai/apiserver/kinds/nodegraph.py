"""Which Secrets and Configs each node may read: those referenced by a project bound to it (Kubernetes' node
authorizer, computed from the projects' watch cache).

Guarantees:

* **Bound projects only.** A project counts for node N while `status.nodeRef == N`; a project moved away (its
  old containers still running under a hand-off) does not, so a node loses access as soon as a project leaves.
* **As fresh as the cache.** The answer follows the apiserver's projects watch cache; a binding the cache has not
  seen yet is not counted (the agent, which learns of bindings through that cache too, retries).
* Read-only over the cache; one pass over the projects per node, resource and cache revision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from caravanserai import v1
from caravanserai.apiserver.kinds import project
from caravanserai.project import datarefs


class NodeGraph:
    """`allows(node, resource, name)`: does a project bound to `node` reference `name` of `resource`?

    The names a node may read are computed once per node, resource and `revision()` of the projects (a list of
    many Secrets costs one pass over the projects, not one per Secret)."""

    def __init__(self, projects: Callable[[], Iterable[v1.Project]], revision: Callable[[], int] = lambda: 0) -> None:
        self._projects = projects
        self._revision = revision
        self._at = -1
        self._readable: dict[tuple[str, str], frozenset[str]] = {}

    def allows(self, node: str, resource: str, name: str) -> bool:
        return name in self.readable(node, resource)

    def readable(self, node: str, resource: str) -> frozenset[str]:
        """The names of `resource` that projects bound to `node` reference."""
        revision = self._revision()
        if revision != self._at:
            self._at, self._readable = revision, {}
        names = self._readable.get((node, resource))
        if names is None:
            names = frozenset(
                name
                for p in self._projects()
                if p.status.node_ref == node
                for name in datarefs.project_refs(p.spec).names(resource)
            )
            self._readable[(node, resource)] = names
        return names


class _Cache(Protocol):
    objects: dict[str, Any]
    revision: int


def over(caches: Mapping[str, _Cache]) -> NodeGraph:
    """The graph over the projects' watch cache among `caches` (watch caches by plural)."""
    projects = caches[project.KIND.plural]
    return NodeGraph(lambda: projects.objects.values(), lambda: projects.revision)


NO_GRAPH = NodeGraph(lambda: ())
"""A graph without projects: nodes read no referenced objects (an authorizer without a projects cache)."""

__all__ = ["NO_GRAPH", "NodeGraph", "over"]
