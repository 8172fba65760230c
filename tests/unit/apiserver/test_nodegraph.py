"""The node authorizer's graph: a node reads the Secrets and Configs its bound projects reference, as of the
projects' revision."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.apiserver.kinds.nodegraph import NodeGraph


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
