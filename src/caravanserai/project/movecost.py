"""What starting a project on a node costs: the start delay (bytes to fetch over the node's download rate) and
whether the node can keep up with the project's backups (RPO feasibility). Shared by the scheduler's scores and
by whoever simulates placement (the autoscaler, preemption).

The inputs are plain records taken once from the messages (`moveneeds.move_needs` of a project, with the cluster's
image sizes resolved; `moveneeds.node_facts` of a node, or any record with the `NodeSupply` fields, such as the
scheduler's `NodeInfo`), so costing a node walks no protobuf message and parses nothing.

Guarantees (pure functions; nothing here reads a clock or changes its inputs):

* **Image bytes** a node lacks: the project's distinct images (references normalised by `moveneeds.image_key`: `nginx`,
  `nginx:latest` and `docker.io/library/nginx:latest` are one image) that are not among the node's image names,
  each at the size any node reported for it (`status.images`), else `ASSUMED_IMAGE_BYTES`.
* **Restore bytes**: the sum over the backed-up volumes (`project.backups`) whose current copy is not on the node
  (`status.volumes[v].node` differs) of the size of the snapshot a restore would use: the hand-off snapshot's
  size when it is known, else the last backup's. A volume with no backup yet costs 0 (it starts empty).
* **Download rate**: the slowest of the node's observed restore rates (`status.network.restoreRates`) for the
  project's repositories when any is known ("restores"), else its measured throughput download ("throughput"),
  else `ASSUMED_DOWNLOAD_RATE` ("assumed"). Unreadable or non-positive quantities count as unknown.
* **Start delay** = (image bytes + restore bytes) / download rate; 0 when nothing has to be fetched.
* **RPO bytes**: per backed-up volume the most any of its last `moveneeds.RPO_SNAPSHOTS` snapshots added (or its last
  backup's, when no snapshot is listed), summed. The node is **RPO feasible** when it uploads them within the
  shortest `every` of the project's volumes; a node with an unknown upload rate, and a project with nothing to
  upload or no readable `every`, are feasible. `rpo_margin` says by how much it misses (1 when feasible).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from caravanserai import v1

ASSUMED_IMAGE_BYTES = 200 * 1024 * 1024
"""Size of an image no node reported (Docker Hub's common images are tens to hundreds of MiB)."""

ASSUMED_DOWNLOAD_RATE = 12.5e6
"""Bytes per second of a node that measured nothing: 100 Mbit/s, a modest office or home uplink."""

SOURCE_RESTORES = "restores"
SOURCE_THROUGHPUT = "throughput"
SOURCE_ASSUMED = "assumed"

NO_RATES: Mapping[str, float] = MappingProxyType({})


def no_rates() -> Mapping[str, float]:
    """NO_RATES, as a dataclass field's default factory (a mapping cannot be a plain default)."""
    return NO_RATES


class NodeSupply(Protocol):
    """What costing needs of a node: its name, image names (normalised), rates in bytes per second (None:
    unknown) and observed restore rates per BackupRepository name."""

    @property
    def name(self) -> str: ...
    @property
    def images(self) -> Set[str]: ...
    @property
    def download(self) -> float | None: ...
    @property
    def upload(self) -> float | None: ...
    @property
    def restore_rates(self) -> Mapping[str, float]: ...


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """A `NodeSupply` taken from a Node message (`node_facts`)."""

    name: str
    images: frozenset[str] = frozenset()
    download: float | None = None
    upload: float | None = None
    restore_rates: Mapping[str, float] = field(default_factory=no_rates)


@dataclass(frozen=True, slots=True)
class VolumeNeeds:
    """One backed-up volume: where its current copy lives ("" when nowhere yet), the bytes a restore of it
    fetches (0: no backup yet), the bytes it adds per backup and its `every` in seconds (None: unreadable)."""

    name: str
    repository: str
    node: str = ""
    restore_bytes: int = 0
    rpo_bytes: int = 0
    every: float | None = None


@dataclass(frozen=True, slots=True)
class MoveNeeds:
    """What a start of the project fetches and uploads, wherever it goes: its distinct images with their sizes,
    its backed-up volumes, their repositories (sorted), the RPO bytes and the shortest `every`."""

    images: tuple[tuple[str, int], ...] = ()
    volumes: tuple[VolumeNeeds, ...] = ()
    repositories: tuple[str, ...] = ()
    rpo_bytes: int = 0
    shortest_every: float | None = None


NO_NEEDS = MoveNeeds()
"""A project that fetches and uploads nothing."""


@dataclass(frozen=True, slots=True)
class Rate:
    """A rate in bytes per second and where it came from (SOURCE_RESTORES, SOURCE_THROUGHPUT, SOURCE_ASSUMED)."""

    bytes_per_second: float
    source: str


@dataclass(frozen=True, slots=True)
class MoveEstimate:
    """Every figure of placing a project on one node (see the module docstring); `upload_rate` 0 is unknown."""

    node: str
    start_delay_seconds: float
    image_bytes: int
    restore_bytes: int
    download: Rate
    rpo_bytes: int
    upload_rate: float
    rpo_feasible: bool

    def message(self, score: float) -> v1.NodeEstimate:
        """The estimate as the API records it, with the node's total score."""
        return v1.NodeEstimate(
            node=self.node,
            start_delay_seconds=self.start_delay_seconds,
            image_bytes=self.image_bytes,
            restore_bytes=self.restore_bytes,
            download_rate=self.download.bytes_per_second,
            download_rate_source=self.download.source,
            rpo_bytes=self.rpo_bytes,
            upload_rate=self.upload_rate,
            rpo_feasible=self.rpo_feasible,
            score=score,
        )


# ---- costing a node ---------------------------------------------------------------------------------------------


def missing_image_bytes(needs: MoveNeeds, node: NodeSupply) -> int:
    """Bytes of the project's images the node does not have."""
    present = node.images
    return sum(size for name, size in needs.images if name not in present)


def restore_bytes(needs: MoveNeeds, node: NodeSupply) -> int:
    """Bytes of the snapshots the node would restore (volumes whose current copy lives elsewhere)."""
    name = node.name
    return sum(volume.restore_bytes for volume in needs.volumes if volume.node != name)


def _download_rate(needs: MoveNeeds, node: NodeSupply) -> tuple[float, str]:
    rates = node.restore_rates
    if rates:
        known = [rates[repository] for repository in needs.repositories if repository in rates]
        if known:
            return min(known), SOURCE_RESTORES
    if node.download is not None and node.download > 0:
        return node.download, SOURCE_THROUGHPUT
    return ASSUMED_DOWNLOAD_RATE, SOURCE_ASSUMED


def download_rate(needs: MoveNeeds, node: NodeSupply) -> Rate:
    """The rate the node fetches the project's bytes at, and its source (see the module docstring)."""
    return Rate(*_download_rate(needs, node))


def start_delay_seconds(needs: MoveNeeds, node: NodeSupply) -> float:
    """Seconds before the project can start on the node: (image bytes + restore bytes) / download rate."""
    fetched = missing_image_bytes(needs, node) + restore_bytes(needs, node)
    return _seconds(fetched, _download_rate(needs, node)[0]) if fetched else 0.0


def _seconds(fetched: int, rate: float) -> float:
    return fetched / rate if fetched else 0.0


def start_delay_function(needs: MoveNeeds) -> Callable[[NodeSupply], float]:
    """`start_delay_seconds` with `needs` fixed, for costing many nodes: exactly the same value for every node
    (the same sums in the same order, the same division), with the project's part worked out once."""
    images = needs.images
    every_image = sum(size for _, size in images)  # what a node without images lacks
    volumes = tuple((volume.node, volume.restore_bytes) for volume in needs.volumes if volume.restore_bytes)
    repositories, assumed = needs.repositories, ASSUMED_DOWNLOAD_RATE

    def delay(node: NodeSupply) -> float:
        present = node.images
        fetched = every_image
        if present:
            fetched = 0
            for name, size in images:
                if name not in present:
                    fetched += size
        if volumes:
            here = node.name
            for where, size in volumes:
                if where != here:
                    fetched += size
        if not fetched:
            return 0.0
        if repositories and node.restore_rates:
            return fetched / _download_rate(needs, node)[0]
        download = node.download
        return fetched / (download if download is not None and download > 0 else assumed)

    return delay


def bare_node_delay(needs: MoveNeeds) -> float | None:
    """The start delay on every node that holds no image and measured no download rate, when that is one figure
    (the project restores nothing, so neither the node's name nor its restore rates matter); else None."""
    if needs.volumes or needs.repositories:
        return None
    fetched = sum(size for _, size in needs.images)
    return _seconds(fetched, ASSUMED_DOWNLOAD_RATE)


def upload_seconds(needs: MoveNeeds, node: NodeSupply) -> float | None:
    """Seconds the node takes to upload one backup's RPO bytes; None when its upload rate is unknown."""
    if not needs.rpo_bytes:
        return 0.0
    upload = node.upload
    return needs.rpo_bytes / upload if upload is not None and upload > 0 else None


def rpo_margin(needs: MoveNeeds, node: NodeSupply) -> float:
    """The shortest `every` over the upload time, at most 1: 1 when the node keeps up (or nothing is known),
    0.25 when a backup takes four times as long as the interval."""
    every = needs.shortest_every
    seconds = upload_seconds(needs, node)
    if every is None or seconds is None or seconds <= every:
        return 1.0
    return every / seconds


def rpo_feasible(needs: MoveNeeds, node: NodeSupply) -> bool:
    """Whether the node uploads the RPO bytes within the shortest `every` (unknown: feasible)."""
    return rpo_margin(needs, node) >= 1.0


def estimate(needs: MoveNeeds, node: NodeSupply) -> MoveEstimate:
    """Every figure of placing the project on `node`."""
    images, restores = missing_image_bytes(needs, node), restore_bytes(needs, node)
    rate = download_rate(needs, node)
    return MoveEstimate(
        node=node.name,
        start_delay_seconds=_seconds(images + restores, rate.bytes_per_second),
        image_bytes=images,
        restore_bytes=restores,
        download=rate,
        rpo_bytes=needs.rpo_bytes,
        upload_rate=node.upload or 0.0,
        rpo_feasible=rpo_feasible(needs, node),
    )


__all__ = [
    "ASSUMED_DOWNLOAD_RATE",
    "ASSUMED_IMAGE_BYTES",
    "MoveEstimate",
    "MoveNeeds",
    "NO_NEEDS",
    "NO_RATES",
    "NodeFacts",
    "NodeSupply",
    "Rate",
    "SOURCE_ASSUMED",
    "SOURCE_RESTORES",
    "SOURCE_THROUGHPUT",
    "VolumeNeeds",
    "bare_node_delay",
    "download_rate",
    "estimate",
    "missing_image_bytes",
    "no_rates",
    "restore_bytes",
    "rpo_feasible",
    "rpo_margin",
    "start_delay_function",
    "start_delay_seconds",
    "upload_seconds",
]
