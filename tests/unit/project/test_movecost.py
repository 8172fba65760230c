"""What a start costs on a node (images to pull, snapshots to restore, download rate) and RPO feasibility, from the
records `moveneeds` reads off projects and nodes."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.clock import timestamp
from caravanserai.project import movecost, moveneeds
from caravanserai.project.movecost import (
    ASSUMED_DOWNLOAD_RATE,
    ASSUMED_IMAGE_BYTES,
    MoveNeeds,
    NodeFacts,
    Rate,
    VolumeNeeds,
)
from caravanserai.testing.builders import node, project

MB = 1024 * 1024
GB = 1024 * MB


def snapshot(id_: str, *, size: int = 0, added: int = 0) -> v1.SnapshotRecord:
    return v1.SnapshotRecord(id=id_, size_bytes=size, bytes_added=added, time=timestamp(1000.0))


def backed_up(
    p: v1.Project, name: str, *, repository: str = "repo", every: str = "5m", node_name: str = ""
) -> v1.VolumeStatus:
    """Give `p` a backed-up Persistent volume `name`; returns its (new) status record to fill in."""
    volume = p.spec.volumes.add(name=name, type=v1.VOLUME_PERSISTENT)
    volume.backup.repository = repository
    volume.backup.every = every
    return p.status.volumes.add(name=name, node=node_name)


# ---- images ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "key"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.27", "nginx:1.27"),
        ("docker.io/library/nginx:1.27", "nginx:1.27"),
        ("library/nginx", "nginx:latest"),
        ("docker.io/grafana/grafana", "grafana/grafana:latest"),
        ("ghcr.io/acme/app:2", "ghcr.io/acme/app:2"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("localhost:5000/app:3", "localhost:5000/app:3"),
        ("nginx@sha256:abc", "nginx@sha256:abc"),
        ("nginx:1.27@sha256:abc", "nginx@sha256:abc"),
        (" nginx:1.27 ", "nginx:1.27"),
    ],
)
def test_image_key(reference: str, key: str) -> None:
    assert moveneeds.image_key(reference) == key


def test_node_images_and_cluster_sizes() -> None:
    a, b = node("a"), node("b")
    a.status.images.add(names=["nginx:1.27", "nginx@sha256:abc"], size_bytes=70 * MB)
    b.status.images.add(names=["docker.io/library/redis"], size_bytes=0)  # size not reported
    b.status.images.add(names=["app:1"], size_bytes=-5)
    assert moveneeds.node_images(a) == {"nginx:1.27": 70 * MB, "nginx@sha256:abc": 70 * MB}
    assert moveneeds.node_images(b) == {"redis:latest": 0, "app:1": 0}
    assert moveneeds.image_sizes([a, b]) == {"nginx:1.27": 70 * MB, "nginx@sha256:abc": 70 * MB}


def test_missing_image_bytes() -> None:
    p = project("p", services=["web", "db", "cache"])
    p.spec.services[0].image = "nginx:1.27"
    p.spec.services[1].image = "postgres:16"
    p.spec.services[2].image = "docker.io/library/nginx:1.27"  # the same image as web's: counted once
    needs = moveneeds.move_needs(p, {"nginx:1.27": 70 * MB})
    assert needs.images == (("nginx:1.27", 70 * MB), ("postgres:16", ASSUMED_IMAGE_BYTES))  # postgres: size unknown
    bare = NodeFacts("n")
    assert movecost.missing_image_bytes(needs, bare) == 70 * MB + ASSUMED_IMAGE_BYTES
    has_nginx = NodeFacts("n", images=frozenset({"nginx:1.27"}))
    assert movecost.missing_image_bytes(needs, has_nginx) == ASSUMED_IMAGE_BYTES
    has_both = NodeFacts("n", images=frozenset({"nginx:1.27", "postgres:16", "other:1"}))
    assert movecost.missing_image_bytes(needs, has_both) == 0


# ---- restore bytes -----------------------------------------------------------------------------------------------


def test_restore_bytes_count_backed_up_volumes_whose_copy_is_elsewhere() -> None:
    p = project("p")
    backed_up(p, "db", node_name="old").last_backup.CopyFrom(snapshot("s1", size=GB))
    backed_up(p, "files", node_name="new").last_backup.CopyFrom(snapshot("s2", size=3 * GB))
    backed_up(p, "fresh")  # no backup yet: starts empty, costs nothing
    p.spec.volumes.add(name="cache", type=v1.VOLUME_PERSISTENT)  # not backed up: its data stays behind
    p.spec.volumes.add(name="tmp")  # Ephemeral
    needs = moveneeds.move_needs(p)
    assert [v.name for v in needs.volumes] == ["db", "files", "fresh"]
    assert movecost.restore_bytes(needs, NodeFacts("old")) == 3 * GB  # db is here; files is on new
    assert movecost.restore_bytes(needs, NodeFacts("new")) == GB
    assert movecost.restore_bytes(needs, NodeFacts("third")) == 4 * GB


def test_a_handed_over_snapshot_is_the_one_restored() -> None:
    p = project("p")
    status = backed_up(p, "db", node_name="old")
    status.last_backup.CopyFrom(snapshot("newest", size=2 * GB))
    status.snapshots.extend([snapshot("newest", size=2 * GB), snapshot("final", size=GB)])
    status.handoff_snapshot = "final"
    assert moveneeds.move_needs(p).volumes[0].restore_bytes == GB
    status.handoff_snapshot = "unlisted"  # unknown size: the last backup's
    assert moveneeds.move_needs(p).volumes[0].restore_bytes == 2 * GB


def test_a_volume_without_status_or_backup_costs_nothing() -> None:
    p = project("p")
    backed_up(p, "db")
    del p.status.volumes[:]
    assert moveneeds.move_needs(p).volumes == (VolumeNeeds("db", "repo", every=300.0),)
    assert movecost.restore_bytes(moveneeds.move_needs(p), NodeFacts("any")) == 0


# ---- download rate and start delay -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "repositories", "rate"),
    [
        (NodeFacts("n", restore_rates={"repo": 250e6}, download=10e6), ("repo",), Rate(250e6, "restores")),
        (NodeFacts("n", restore_rates={"a": 50e6, "b": 80e6}), ("a", "b", "c"), Rate(50e6, "restores")),  # slowest
        (NodeFacts("n", restore_rates={"other": 250e6}, download=10e6), ("repo",), Rate(10e6, "throughput")),
        (NodeFacts("n", restore_rates={"repo": 250e6}, download=10e6), (), Rate(10e6, "throughput")),
        (NodeFacts("n", download=10e6), ("repo",), Rate(10e6, "throughput")),
        (NodeFacts("n"), ("repo",), Rate(ASSUMED_DOWNLOAD_RATE, "assumed")),
        (NodeFacts("n", download=0.0), (), Rate(ASSUMED_DOWNLOAD_RATE, "assumed")),
    ],
)
def test_download_rate(facts: NodeFacts, repositories: tuple[str, ...], rate: Rate) -> None:
    assert movecost.download_rate(MoveNeeds(repositories=repositories), facts) == rate


def test_node_facts_read_the_node_status() -> None:
    n = node("n")
    assert moveneeds.node_facts(n) == NodeFacts("n")
    n.status.network.throughput.download = "12.5M"
    n.status.network.throughput.upload = "1Mi"
    n.status.network.restore_rates.update({"repo": "250M", "bad": "quick", "zero": "0"})
    n.status.images.add(names=["nginx"], size_bytes=1)
    assert moveneeds.node_facts(n) == NodeFacts("n", frozenset({"nginx:latest"}), 12.5e6, float(MB), {"repo": 250e6})
    assert moveneeds.parse_rate("") is None and moveneeds.parse_rate("-3") is None


def test_start_delay_is_fetched_bytes_over_the_rate() -> None:
    volume = VolumeNeeds("db", "repo", node="old", restore_bytes=GB)
    needs = MoveNeeds(images=(("app:1", 100 * MB),), volumes=(volume,), repositories=("repo",))
    cases = [
        (NodeFacts("new", download=100 * MB), (100 * MB + GB) / (100 * MB)),
        (NodeFacts("new", download=100 * MB, restore_rates={"repo": 1124 * MB}), 1.0),
        (NodeFacts("old", download=100 * MB), 1.0),  # only the image
        (NodeFacts("old", images=frozenset({"app:1"})), 0.0),  # nothing to fetch, whatever the rate
        (NodeFacts("new"), (100 * MB + GB) / ASSUMED_DOWNLOAD_RATE),
    ]
    for facts, seconds in cases:
        assert movecost.start_delay_seconds(needs, facts) == pytest.approx(seconds)
        assert movecost.start_delay_function(needs)(facts) == movecost.start_delay_seconds(needs, facts)


# ---- RPO ---------------------------------------------------------------------------------------------------------


def test_rpo_bytes_are_the_largest_recent_additions_summed_over_volumes() -> None:
    p = project("p")
    db = backed_up(p, "db", every="1m")
    db.snapshots.extend([snapshot(f"s{i}", added=a) for i, a in enumerate([5, 9, 7, 1, 2, 500])])  # 500: 6th, old
    files = backed_up(p, "files", every="10m")
    files.last_backup.CopyFrom(snapshot("f", added=30))  # no snapshot listed: the last backup's
    backed_up(p, "fresh", every="30s")  # nothing taken yet
    needs = moveneeds.move_needs(p)
    assert [v.rpo_bytes for v in needs.volumes] == [9, 30, 0]
    assert (needs.rpo_bytes, needs.shortest_every) == (39, 30.0)


@pytest.mark.parametrize(
    ("rpo_bytes", "every", "upload", "seconds", "margin"),
    [
        (60 * MB, 60.0, 2 * MB, 30.0, 1.0),  # uploads in 30 s of 60: feasible
        (60 * MB, 60.0, 1 * MB, 60.0, 1.0),  # exactly every: feasible
        (60 * MB, 60.0, 0.5 * MB, 120.0, 0.5),  # twice as long: half
        (60 * MB, 60.0, None, None, 1.0),  # unknown upload rate: feasible
        (60 * MB, None, 1.0, 60 * MB, 1.0),  # no readable every: feasible
        (0, 60.0, 1.0, 0.0, 1.0),  # nothing to upload
    ],
)
def test_rpo_feasibility(
    rpo_bytes: int, every: float | None, upload: float | None, seconds: float | None, margin: float
) -> None:
    needs = MoveNeeds(rpo_bytes=rpo_bytes, shortest_every=every)
    facts = NodeFacts("n", upload=upload)
    assert movecost.upload_seconds(needs, facts) == (None if seconds is None else pytest.approx(seconds))
    assert movecost.rpo_margin(needs, facts) == pytest.approx(margin)
    assert movecost.rpo_feasible(needs, facts) is (margin >= 1.0)


def test_an_unreadable_every_is_left_out() -> None:
    p = project("p")
    backed_up(p, "db", every="often")
    backed_up(p, "files", every="")
    assert [v.every for v in moveneeds.move_needs(p).volumes] == [None, None]
    assert moveneeds.move_needs(p).shortest_every is None


# ---- the whole estimate ------------------------------------------------------------------------------------------


def test_estimate_and_its_message() -> None:
    p = project("p", image="app:1")
    status = backed_up(p, "db", every="1m", node_name="old")
    status.last_backup.CopyFrom(snapshot("s", size=GB, added=120 * MB))
    status.snapshots.append(snapshot("s", size=GB, added=120 * MB))
    needs = moveneeds.move_needs(p, {"app:1": 100 * MB})
    facts = NodeFacts("new", download=10 * MB, upload=1 * MB, restore_rates={"repo": 250 * MB})
    estimate = movecost.estimate(needs, facts)
    assert estimate == movecost.MoveEstimate(
        node="new",
        start_delay_seconds=(100 * MB + GB) / (250 * MB),
        image_bytes=100 * MB,
        restore_bytes=GB,
        download=Rate(250 * MB, "restores"),
        rpo_bytes=120 * MB,
        upload_rate=1 * MB,
        rpo_feasible=False,  # 120 s to upload what a minute adds
    )
    assert estimate.start_delay_seconds == movecost.start_delay_seconds(needs, facts)
    message = estimate.message(321.5)
    assert (message.node, message.score, message.download_rate_source) == ("new", 321.5, "restores")
    assert (message.image_bytes, message.restore_bytes, message.rpo_bytes) == (100 * MB, GB, 120 * MB)
    assert (message.download_rate, message.upload_rate, message.rpo_feasible) == (250 * MB, MB, False)
    at_home = movecost.estimate(needs, NodeFacts("old", images=frozenset({"app:1"})))
    assert (at_home.start_delay_seconds, at_home.upload_rate, at_home.rpo_feasible) == (0.0, 0.0, True)
    assert at_home.download == Rate(ASSUMED_DOWNLOAD_RATE, "assumed")


def test_the_start_delay_on_a_bare_node_is_one_figure_unless_the_project_restores() -> None:
    images = MoveNeeds(images=(("a:1", 100 * MB), ("b:1", 25 * MB)))
    assert movecost.bare_node_delay(images) == 125 * MB / ASSUMED_DOWNLOAD_RATE
    assert movecost.bare_node_delay(images) == movecost.start_delay_seconds(images, NodeFacts("any"))
    assert movecost.bare_node_delay(MoveNeeds()) == 0.0
    restoring = MoveNeeds(volumes=(VolumeNeeds("db", "repo", node="n", restore_bytes=GB),), repositories=("repo",))
    assert movecost.bare_node_delay(restoring) is None  # the node's name and restore rates matter
