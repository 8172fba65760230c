"""The estimates a binding records (status.placement) and the Scheduled event's reason."""

from __future__ import annotations

from typing import cast

import pytest
from test_scheduler_boundevents import Recorded, drain

from caravanserai import v1
from caravanserai.controller import EventRecorder
from caravanserai.controllers.scheduler import estimates
from caravanserai.controllers.scheduler.algorithm import Decision
from caravanserai.controllers.scheduler.boundevents import BoundEvents
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.project.movecost import MoveNeeds, VolumeNeeds
from caravanserai.testing import FakeClock
from caravanserai.testing.builders import project
from caravanserai.workqueue import WorkQueue

GIB = 1024**3
MIB = 1024**2

NEEDS = MoveNeeds(
    images=(("app:1", 100 * MIB),),
    volumes=(VolumeNeeds("db", "repo", node="node-c", restore_bytes=GIB, rpo_bytes=10 * MIB, every=60.0),),
    repositories=("repo",),
    rpo_bytes=10 * MIB,
    shortest_every=60.0,
)


def nodes() -> dict[str, NodeInfo]:
    return {
        "node-a": NodeInfo("node-a", download=25e6, images=frozenset({"app:1"})),
        "node-b": NodeInfo("node-b", restore_rates={"repo": 250e6}, images=frozenset({"app:1"}), upload=1e3),
    }


def test_placement_estimates_the_chosen_node_and_the_runner_up() -> None:
    known = nodes()
    info = ProjectInfo("p", needs=NEEDS)
    placement = estimates.placement(
        info, Decision("node-b", 310.0, runner_up="node-a", runner_up_score=290.0), known.get
    )
    assert placement is not None
    chosen, runner_up = placement.chosen, placement.runner_up
    assert (chosen.node, chosen.score, chosen.restore_bytes, chosen.image_bytes) == ("node-b", 310.0, GIB, 0)
    assert (chosen.download_rate, chosen.download_rate_source) == (250e6, "restores")
    assert chosen.start_delay_seconds == pytest.approx(GIB / 250e6)
    assert (chosen.rpo_bytes, chosen.upload_rate, chosen.rpo_feasible) == (10 * MIB, 1e3, False)
    assert (runner_up.node, runner_up.score, runner_up.download_rate_source) == ("node-a", 290.0, "throughput")
    assert runner_up.start_delay_seconds == pytest.approx(GIB / 25e6)
    assert runner_up.rpo_feasible  # its upload rate is unknown

    alone = estimates.placement(info, Decision("node-a", 250.0), known.get)
    assert alone is not None and alone.chosen.node == "node-a" and not alone.HasField("runner_up")
    assert estimates.placement(info, Decision(None), known.get) is None
    assert estimates.placement(info, Decision("gone", 1.0), known.get) is None


def estimate(node: str, delay: float, **fields: object) -> v1.NodeEstimate:
    """An estimate for `node` (RPO feasible unless `fields` say otherwise)."""
    return v1.NodeEstimate(node=node, start_delay_seconds=delay, **{"rpo_feasible": True, **fields})  # type: ignore[arg-type]  # NodeEstimate fields, typed object here


def test_the_message_says_why_when_the_estimates_set_the_nodes_apart() -> None:
    placement = v1.PlacementEstimates(
        chosen=estimate("node-b", GIB / 250e6, restore_bytes=GIB, download_rate=250e6, download_rate_source="restores"),
        runner_up=estimate("node-a", 40.2),
    )
    expected = "Bound to node-b: starts in ~4 s (1.0 GiB to restore at 250 MB/s); runner-up node-a ~40 s"
    assert estimates.bound_message(placement) == expected


@pytest.mark.parametrize(
    ("chosen", "runner_up", "message"),
    [
        (estimate("b", 0.0), estimate("a", 0.5), None),  # alike: the plain message
        (estimate("b", 3.0, image_bytes=200 * MIB), None, None),  # nothing to compare with, nothing to restore
        (
            estimate("b", 0.0),
            estimate("a", 16.8, image_bytes=200 * MIB, download_rate=12.5e6, download_rate_source="assumed"),
            "Bound to b: starts at once (nothing to pull or restore); runner-up a ~17 s",
        ),
        (
            estimate("b", 200.0, image_bytes=200 * MIB, restore_bytes=2 * GIB, download_rate=11.5e6),
            None,
            "Bound to b: starts in ~3 min (200 MiB to pull and 2.0 GiB to restore at 11.5 MB/s)",
        ),
        (
            estimate("b", 9000.0, restore_bytes=90 * GIB, download_rate=1.1e7, download_rate_source="assumed"),
            estimate("a", 9000.0, rpo_feasible=False),
            "Bound to b: starts in ~2.5 h (90.0 GiB to restore at an assumed 11.0 MB/s); "
            "runner-up a ~2.5 h (backups would lag)",
        ),
        (
            estimate("b", 0.5, rpo_feasible=False, rpo_bytes=300 * MIB, upload_rate=1e6),
            estimate("a", 0.5),
            "Bound to b: starts at once (nothing to pull or restore); backups may lag: 300 MiB per backup take "
            "~5 min to upload, longer than every (60s); runner-up a <1 s",
        ),
    ],
)
def test_message_cases(chosen: v1.NodeEstimate, runner_up: v1.NodeEstimate | None, message: str | None) -> None:
    placement = v1.PlacementEstimates(chosen=chosen)
    if runner_up is not None:
        placement.runner_up.CopyFrom(runner_up)
    assert estimates.bound_message(placement, every=60.0) == message


def test_starts_at_once_when_nothing_is_fetched_even_with_a_slower_rpo() -> None:
    placement = v1.PlacementEstimates(chosen=estimate("b", 0.0, rpo_feasible=False, rpo_bytes=5))
    assert estimates.bound_message(placement) == (
        "Bound to b: starts at once (nothing to pull or restore); backups may lag: 5 B per backup take <1 s to upload"
    )


@pytest.mark.parametrize(
    ("count", "text"),
    [(512, "512 B"), (1536, "1.5 KiB"), (200 * MIB, "200 MiB"), (GIB, "1.0 GiB"), (12 * GIB, "12.0 GiB")],
)
def test_bytes_text(count: int, text: str) -> None:
    assert estimates.bytes_text(count) == text


@pytest.mark.parametrize(
    ("rate", "text"), [(800.0, "800 B/s"), (12.5e6, "12.5 MB/s"), (250e6, "250 MB/s"), (2e9, "2.0 GB/s")]
)
def test_rate_text(rate: float, text: str) -> None:
    assert estimates.rate_text(rate) == text


async def test_the_event_carries_the_noted_message() -> None:
    recorder, queue = Recorded(), WorkQueue[str](clock=FakeClock())
    events = BoundEvents(cast(EventRecorder, recorder), queue)
    events.note(project("a"), "node-b", "Bound to node-b: starts in ~4 s (1.0 GiB to restore at 250 MB/s)")
    events.note(project("b"), "node-b")
    await drain(queue, events)
    assert [event[4] for event in recorder.events] == [
        "Bound to node-b: starts in ~4 s (1.0 GiB to restore at 250 MB/s)",
        "Successfully assigned b to node-b",
    ]
