"""The agent and a project reclaimed by its cohort's quota: once it is Queued (unbound, no hand-off), the node it
ran on removes its containers at once."""

from __future__ import annotations

from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.agent.reconciler import ProjectReconciler
from caravanserai.project import lifecycle
from caravanserai.testing import FakeClient
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock


@dataclass
class Runtime:
    """The calls of `ProjectRuntime` this path makes: removals, recorded."""

    removed: list[str] = field(default_factory=list)

    async def remove(self, name: str, *, persistent: bool = False) -> int:
        self.removed.append(name)
        return 2


def running_on(node: str) -> v1.Project:
    p = project("train", namespace="team-b")
    meta.set_phase(p, v1.RUNNING, reason="Test", message="running", now=1.0)
    p.status.node_ref = node
    return p


async def test_a_project_reclaimed_back_to_the_queue_has_its_containers_removed_by_its_node() -> None:
    reclaimed = lifecycle.reclaim(
        running_on("n1"), preemptor="team-a/urgent", message="lender needs it", now=2.0, deadline=62.0
    )
    assert reclaimed.status.phase == v1.QUEUED
    client = FakeClient()  # not read: the informer's copy says where it is
    runtime = Runtime()
    agent = ProjectReconciler(
        client=client,  # type: ignore[arg-type]  # the fake has the calls it makes
        projects=runtime,  # type: ignore[arg-type]  # only `remove` is called on this path
        lookup=lambda key: reclaimed if key == "team-b/train" else None,
        node="n1",
        clock=FakeClock(start=3.0),
    )
    assert await agent.sync("team-b/train") is None
    assert runtime.removed == ["team-b/train"]
