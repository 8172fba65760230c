"""Which Secrets and Configs each node may read: those referenced by a project bound to it (Kubernetes' node
authorizer, computed from the projects' watch cache).

Guarantees:

* **Bound projects only.** A project counts for node N while `status.nodeRef == N`; a project moved away (its
  old containers still running under a hand-off) does not, so a node loses access as soon as a project leaves.
* **As fresh as the cache.** The answer follows the apiserver's projects watch cache; a binding the cache has not
  seen yet is not counted (the agent, which learns of bindings through that cache too, retries).
* Read-only over the cache; O(projects bound to the node) per question.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from caravanserai import datarefs
from caravanserai.apiserver.kinds import project


class NodeGraph:
    """`allows(node, resource, name)`: does a project bound to `node` reference `name` of `resource`?"""

    def __init__(self, projects: Callable[[], Iterable[Any]]) -> None:
        self._projects = projects

    def allows(self, node: str, resource: str, name: str) -> bool:
        return any(
            p.status.node_ref == node and datarefs.references(p.spec, resource, name) for p in self._projects()
        )


class _Cache(Protocol):
    objects: dict[str, Any]


def over(caches: Mapping[str, _Cache]) -> NodeGraph:
    """The graph over the projects' watch cache among `caches` (watch caches by plural)."""
    projects = caches[project.KIND.plural]
    return NodeGraph(lambda: projects.objects.values())


NO_GRAPH = NodeGraph(lambda: ())
"""A graph without projects: nodes read no referenced objects (an authorizer without a projects cache)."""

__all__ = ["NO_GRAPH", "NodeGraph", "over"]
