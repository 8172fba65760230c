"""Placement that knows what a move costs, against a real apiserver and etcd with simulated nodes: the start
delay (images to pull, snapshots to restore, over the node's download rate) and RPO feasibility score the nodes,
and the binding records both estimates (`status.placement`) and says why in its Scheduled event."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from cluster_sim import add_node, events_for, running_manager

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, timestamp
from caravanserai.controllers.scheduler import app
from caravanserai.project.movecost import ASSUMED_IMAGE_BYTES
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()
GIB = 1024**3
MIB = 1024**2
IMAGE = "busybox:test"


async def node_with(client: Client, name: str, change: Callable[[v1.NodeStatus], None]) -> v1.Node:
    """A Ready node (4 cpu, 8Gi) whose status `change` fills in as its agent would report it."""
    await add_node(client, name)
    current = await client.nodes.get(name)
    updated = meta.copy(current)
    change(updated.status)
    return await client.nodes.update_status(updated)


def reports(
    *, download: str = "", upload: str = "", restore_rates: Mapping[str, str] | None = None, images: bool = True
) -> Callable[[v1.NodeStatus], None]:
    def change(status: v1.NodeStatus) -> None:
        status.network.throughput.download = download
        status.network.throughput.upload = upload
        status.network.restore_rates.update(restore_rates or {})
        if images:  # it holds the project's image already: only the data decides
            status.images.add(names=[IMAGE, "busybox@sha256:" + "0" * 64], size_bytes=5 * MIB)

    return change


async def backed_up_project(
    client: Client, name: str, *, size: int, added: int = 0, every: str = "1m", on: str = ""
) -> v1.Project:
    """A Pending project with one backed-up volume whose last backup (on node `on`) is `size` bytes and whose
    recent snapshots added `added` bytes each, written by hand as an agent would have recorded them."""
    spec = project(name, image=IMAGE)
    volume = spec.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    volume.backup.repository = "repo"
    volume.backup.every = every
    volume.backup.keep.last = 3
    spec.spec.services[0].volume_mounts.add(name="data", mount_path="/data")
    created = await client.projects.create(spec)
    status = meta.copy(created)
    record = v1.SnapshotRecord(id="ab" * 32, node=on or "gone", size_bytes=size, bytes_added=added)
    record.time.CopyFrom(timestamp(CLOCK.now() - 60))
    volume_status = status.status.volumes.add(name="data", node=on or "gone", epoch=f"{on or 'gone'}/0011aabb")
    volume_status.last_backup.CopyFrom(record)
    volume_status.snapshots.append(record)
    return await client.projects.update_status(status)


async def bound(client: Client, name: str) -> v1.Project:
    async def check() -> v1.Project | None:
        p = await client.projects.get(name)
        return p if p.status.phase == v1.SCHEDULED else None

    return await wait_for(check, 10, message=f"{name} bound")


async def scheduled_message(client: Client, name: str) -> str:
    """The Scheduled event's message up to the scores by plugin (`test_scheduler_affinity_sim` checks those)."""
    events = await wait_for(lambda: events_for(client, name, "Scheduled"), 10, message=f"{name}'s Scheduled event")
    return events[0].spec.message.partition(". Scores: ")[0]


def scheduler(client: Client):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
    return running_manager(client, lambda m: app.setup(m, client, CLOCK))


RATE_CASES = {
    # the slow node measures 10 MB/s, the fast one 1 GB/s: their throughput decides
    "throughput": (reports(download="10M"), reports(download="1G"), "throughput", 1e9),
    # the throughputs say the opposite, but the rates their own restores from "repo" observed win
    "restores": (
        reports(download="1G", restore_rates={"repo": "10M"}),
        reports(download="10M", restore_rates={"repo": "1G", "other": "1M"}),
        "restores",
        1e9,
    ),
}


@pytest.mark.parametrize("case", sorted(RATE_CASES))
async def test_a_large_snapshot_lands_on_the_faster_node(client: Client, case: str) -> None:
    slow_reports, fast_reports, source, fast_rate = RATE_CASES[case]
    await node_with(client, "a-slow", slow_reports)
    await node_with(client, "b-fast", fast_reports)
    await backed_up_project(client, "db", size=4 * GIB)
    async with scheduler(client):
        db = await bound(client, "db")
        message = await scheduled_message(client, "db")
    assert db.status.node_ref == "b-fast"
    chosen, runner_up = db.status.placement.chosen, db.status.placement.runner_up
    assert (chosen.node, runner_up.node) == ("b-fast", "a-slow")
    assert (chosen.restore_bytes, chosen.image_bytes) == (4 * GIB, 0)  # it holds the image; the data is elsewhere
    assert (chosen.download_rate, chosen.download_rate_source) == (fast_rate, source)
    assert chosen.start_delay_seconds == pytest.approx(4 * GIB / fast_rate)
    assert (runner_up.download_rate, runner_up.download_rate_source) == (10e6, source)
    assert runner_up.start_delay_seconds == pytest.approx(4 * GIB / 10e6)
    assert chosen.score > runner_up.score > 0
    assert chosen.rpo_feasible and runner_up.rpo_feasible  # nothing added per backup
    assert message == "Bound to b-fast: starts in ~4 s (4.0 GiB to restore at 1.0 GB/s); runner-up a-slow ~7 min"


async def test_the_node_that_holds_the_data_starts_at_once(client: Client) -> None:
    await node_with(client, "a-fast", reports(download="1G"))
    await node_with(client, "b-home", reports(download="10M"))  # slow, but the current copy is here
    await backed_up_project(client, "db", size=4 * GIB, on="b-home")
    async with scheduler(client):
        db = await bound(client, "db")
    assert db.status.node_ref == "b-home"
    chosen = db.status.placement.chosen
    assert (chosen.start_delay_seconds, chosen.restore_bytes, chosen.image_bytes) == (0.0, 0, 0)
    assert db.status.placement.runner_up.restore_bytes == 4 * GIB


async def test_a_slow_upload_is_scored_down_but_never_excluded(client: Client) -> None:
    # 100 MiB added per backup every minute: 1 kB/s cannot keep up, 10 MB/s can
    await node_with(client, "a-lagging", reports(download="1G", upload="1k"))
    await node_with(client, "b-keeping-up", reports(download="1G", upload="10M"))
    await backed_up_project(client, "both", size=GIB, added=100 * MIB)
    async with scheduler(client):
        both = await bound(client, "both")
    chosen, runner_up = both.status.placement.chosen, both.status.placement.runner_up
    assert (both.status.node_ref, runner_up.node) == ("b-keeping-up", "a-lagging")
    assert chosen.rpo_feasible and not runner_up.rpo_feasible
    assert (runner_up.rpo_bytes, runner_up.upload_rate) == (100 * MIB, 1e3)
    assert chosen.start_delay_seconds == runner_up.start_delay_seconds  # alike but for the upload
    assert chosen.score - runner_up.score == pytest.approx(99.0)  # the RPO score: 100 against its floor of 1


async def test_the_only_node_is_chosen_even_when_it_cannot_keep_up(client: Client) -> None:
    await node_with(client, "lagging", reports(download="1G", upload="1k"))
    await backed_up_project(client, "db", size=GIB, added=100 * MIB)
    async with scheduler(client):
        db = await bound(client, "db")
        message = await scheduled_message(client, "db")
    assert db.status.node_ref == "lagging"
    chosen = db.status.placement.chosen
    assert not chosen.rpo_feasible and not db.status.placement.HasField("runner_up")
    assert message.startswith("Bound to lagging: starts in ~1 s (1.0 GiB to restore at 1.0 GB/s); backups may lag:")
    assert message.endswith("longer than every (60s)")


async def test_a_project_without_backups_gets_estimates_and_the_plain_event(client: Client) -> None:
    await node_with(client, "n1", reports(download="10M", images=False))
    await node_with(client, "n2", reports(download="10M", images=False))
    await client.projects.create(project("web", image=IMAGE))
    async with scheduler(client):
        web = await bound(client, "web")
        message = await scheduled_message(client, "web")
    chosen = web.status.placement.chosen
    assert chosen.node == web.status.node_ref and web.status.placement.runner_up.node in {"n1", "n2"}
    assert (chosen.image_bytes, chosen.restore_bytes) == (ASSUMED_IMAGE_BYTES, 0)  # no node reported its size
    assert message == f"Successfully assigned web to {web.status.node_ref}"
