"""Small parts around the volumes room: Docker's volume and image documents read into records, the node's image
inventory and restore rates, the Secret read as restic's environment, the per-volume locks."""

from __future__ import annotations

import asyncio

import pytest

from caravanserai import v1
from caravanserai.agent.docker import containers, naming, records
from caravanserai.agent.host import inventory
from caravanserai.agent.volumes.repository import environment_of
from caravanserai.agent.volumes.resticerrors import REPOSITORY, ResticError
from caravanserai.agent.volumes.shared import RestoreRates, VolumeLocks
from caravanserai.testing.builders import project


def test_a_volume_document_gives_mountpoint_labels_and_creation_time() -> None:
    info = records.volume_info(
        {
            "Name": "cara_p_data_n1",
            "Mountpoint": "/var/lib/docker/volumes/cara_p_data_n1/_data",
            "CreatedAt": "2026-12-02T03:40:29Z",
            "Labels": {naming.LABEL_EPOCH: "n1/0badcafe"},
        }
    )
    assert (info.name, info.mountpoint, info.label(naming.LABEL_EPOCH)) == (
        "cara_p_data_n1",
        "/var/lib/docker/volumes/cara_p_data_n1/_data",
        "n1/0badcafe",
    )
    assert info.created == 1796182829.0
    assert records.volume_info({}) == records.VolumeInfo()


def test_image_listings_keep_named_images_with_sizes() -> None:
    listing = [
        {"RepoTags": ["busybox:test"], "RepoDigests": ["busybox@sha256:ab"], "Size": 1980000},
        {"RepoTags": ["<none>:<none>"], "RepoDigests": None, "Size": 5},
        {"RepoTags": None, "RepoDigests": ["alpine@sha256:cd"], "Size": "7"},
    ]
    found = records.image_summaries(listing)
    assert found == [
        records.ImageSummary(("busybox:test", "busybox@sha256:ab"), 1980000),
        records.ImageSummary((), 5),
        records.ImageSummary(("alpine@sha256:cd",), 7),
    ]
    assert inventory.node_images(found) == [
        v1.NodeImage(names=["alpine@sha256:cd"], size_bytes=7),
        v1.NodeImage(names=["busybox:test", "busybox@sha256:ab"], size_bytes=1980000),
    ]
    assert inventory.restore_rates({"b": 12_500_000.0, "a": 999.0}) == {"a": "999", "b": "12.5M"}


def test_a_persistent_volume_is_made_with_the_epoch_of_its_copy() -> None:
    p = project("p")
    volume = p.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    config = containers.volume_config(p, volume, node="n1", epoch="n1/0badcafe")
    assert config["Name"] == "cara_p_data_n1" and config["Labels"][naming.LABEL_EPOCH] == "n1/0badcafe"
    assert naming.LABEL_EPOCH not in containers.volume_config(p, volume, node="n1")["Labels"]


def test_the_secret_becomes_restics_environment_or_a_clear_refusal() -> None:
    secret = v1.Secret()
    secret.spec.data["RESTIC_PASSWORD"] = b"pw"
    secret.spec.data["AWS_SECRET_ACCESS_KEY"] = b"key"
    assert environment_of(secret, where="Secret s") == {"RESTIC_PASSWORD": "pw", "AWS_SECRET_ACCESS_KEY": "key"}
    del secret.spec.data["RESTIC_PASSWORD"]
    with pytest.raises(ResticError, match=r"^Secret s has no RESTIC_PASSWORD$") as caught:
        environment_of(secret, where="Secret s")
    assert caught.value.kind == REPOSITORY
    secret.spec.data["RESTIC_PASSWORD"] = b"\xff"
    with pytest.raises(ResticError, match=r"^Secret s: key RESTIC_PASSWORD is not text$"):
        environment_of(secret, where="Secret s")


async def test_one_lock_per_volume_and_restore_rates_wake_the_node_report() -> None:
    locks = VolumeLocks()
    assert locks.hold("p", "data") is locks.hold("p", "data") and locks.hold("p", "data") is not locks.hold("p", "logs")
    async with locks.hold("p", "data"):
        locks.forget("p")  # a held lock stays
        assert locks.hold("p", "data").locked()
    locks.forget("p")
    assert not locks.hold("p", "data").locked()
    rates = RestoreRates()
    rates.observe("offsite", 0, 1.0)
    assert rates.rates() == {} and not rates.changed.is_set()
    rates.observe("offsite", 10_000_000, 2.0)
    assert rates.rates() == {"offsite": 5_000_000.0} and rates.changed.is_set()
    await asyncio.sleep(0)


def test_the_node_lists_its_largest_images_within_the_cap() -> None:
    found = [records.ImageSummary((f"img-{i:04d}:v1",), i) for i in range(inventory.MAX_IMAGES + 50)]
    listed = inventory.node_images(found)
    assert len(listed) == inventory.MAX_IMAGES
    assert min(image.size_bytes for image in listed) == 50  # the 50 smallest are left out
