"""Routes for tests that feed an ingress route table by hand: what the routes controller would derive."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.project import routing


def route_for(project: v1.Project, *nodes: v1.Node) -> v1.Route:
    """The Route `routing.route_of` derives from `project` (given a uid from its key when it has none) and `nodes`
    (the ones it names; others are unknown). The project must declare an ingress."""
    if not project.metadata.uid:
        project = meta.copy(project)
        project.metadata.uid = f"uid-{meta.key_of(project)}"
    by_name = {n.metadata.name: n for n in nodes}
    route = routing.route_of(project, by_name.get)
    assert route is not None, f"project {project.metadata.name} declares no ingress"
    return route
