"""What a move needs, read from the messages: the records `movecost` costs, taken once per project or node.

* `move_needs(project, sizes)`: the project's distinct images (references normalised by `image_key`) with their
  sizes from `sizes` (name → bytes, as any node reported them; unknown or 0: `movecost.ASSUMED_IMAGE_BYTES`), and
  per backed-up volume (`project.backups`): where its current copy lives (`status.volumes[v].node`), the bytes a
  restore fetches (the hand-off snapshot's size when it is listed, else the last backup's; 0 without a backup),
  the bytes it adds per backup (the most any of its last `RPO_SNAPSHOTS` snapshots added, else its last backup's)
  and its `every` (None when unreadable).
* `node_facts(node)`: the node's image names (normalised), its measured download and upload rates and its observed
  restore rates per repository; unreadable or non-positive quantities are unknown (None, left out).
* `image_key` spells one image one way, as Docker's image list does (`RepoTags`, `RepoDigests`).

Pure; nothing here changes its inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from caravanserai import v1
from caravanserai.project import backups
from caravanserai.project.movecost import (
    ASSUMED_IMAGE_BYTES,
    NO_RATES,
    MoveNeeds,
    NodeFacts,
    VolumeNeeds,
)
from caravanserai.text.durations import parse_duration
from caravanserai.text.quantity import parse_quantity

RPO_SNAPSHOTS = 5
"""How many of a volume's newest snapshots tell the bytes it adds per backup."""

NO_SIZES: Mapping[str, int] = MappingProxyType({})

_DEFAULT_REGISTRY_PREFIXES = ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/")


@functools.lru_cache(maxsize=8192)
def image_key(reference: str) -> str:
    """One spelling per image: Docker Hub's default registry and `library/` dropped, `:latest` added when the
    reference names neither tag nor digest, a tag dropped when a digest is given (`nginx:1@sha256:…` →
    `nginx@sha256:…`, as Docker's RepoDigests spell it). Cached: every node reports the same few names."""
    ref = reference.strip()
    for prefix in _DEFAULT_REGISTRY_PREFIXES:
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    ref = ref.removeprefix("library/")
    name, at, digest = ref.partition("@")
    head, slash, last = name.rpartition("/")
    if at:
        return f"{head}{slash}{last.partition(':')[0]}@{digest}"
    return ref if ":" in last else f"{ref}:latest"


def node_images(node: v1.Node) -> dict[str, int]:
    """Every name (normalised) of the images the node reports, with its size in bytes (0: not reported)."""
    return {image_key(name): max(0, image.size_bytes) for image in node.status.images for name in image.names}


def image_sizes(nodes: Iterable[v1.Node]) -> dict[str, int]:
    """Image name → size, from every node that reports a size (for one-off use; the scheduler keeps its own)."""
    sizes: dict[str, int] = {}
    for node in nodes:
        sizes.update((name, size) for name, size in node_images(node).items() if size > 0)
    return sizes


def parse_rate(text: str) -> float | None:
    """A rate quantity ("12.5M") in bytes per second; None when empty, unreadable or not positive."""
    if not text:
        return None
    try:
        rate = float(parse_quantity(text))
    except ValueError:
        return None
    return rate if rate > 0 else None


def restore_rates(node: v1.Node) -> Mapping[str, float]:
    """The node's readable observed restore rates per repository (NO_RATES when none)."""
    rates = {repo: rate for repo, text in node.status.network.restore_rates.items() if (rate := parse_rate(text))}
    return rates or NO_RATES


def node_facts(node: v1.Node) -> NodeFacts:
    """The costing view of a Node message."""
    throughput = node.status.network.throughput
    return NodeFacts(
        name=node.metadata.name,
        images=frozenset(node_images(node)),
        download=parse_rate(throughput.download),
        upload=parse_rate(throughput.upload),
        restore_rates=restore_rates(node),
    )


def _every(volume: v1.Volume) -> float | None:
    try:
        seconds = parse_duration(volume.backup.every) if volume.backup.every else 0.0
    except ValueError:
        return None
    return seconds or None


def _restored_size(status: v1.VolumeStatus) -> int:
    """Bytes of the snapshot a restore would use: the hand-off snapshot when listed, else the last backup."""
    handoff = status.handoff_snapshot
    if handoff and status.last_backup.id != handoff:
        for record in status.snapshots:
            if record.id == handoff:
                return max(0, record.size_bytes)
    return max(0, status.last_backup.size_bytes) if status.HasField("last_backup") else 0


def _added_per_backup(status: v1.VolumeStatus) -> int:
    recent = status.snapshots[:RPO_SNAPSHOTS]
    if recent:
        return max(0, *(record.bytes_added for record in recent))
    return max(0, status.last_backup.bytes_added) if status.HasField("last_backup") else 0


def volume_needs(volume: v1.Volume, status: v1.VolumeStatus | None) -> VolumeNeeds:
    """The needs of one backed-up volume given its recorded status (None: nothing recorded yet)."""
    repository, every = volume.backup.repository, _every(volume)
    if status is None:
        return VolumeNeeds(volume.name, repository, every=every)
    return VolumeNeeds(volume.name, repository, status.node, _restored_size(status), _added_per_backup(status), every)


def move_needs(project: v1.Project, sizes: Mapping[str, int] = NO_SIZES) -> MoveNeeds:
    """The needs of `project`; `sizes` (image name → bytes, normalised names) gives the images' sizes."""
    keys = sorted({image_key(service.image) for service in project.spec.services if service.image})
    images = tuple((key, sizes.get(key) or ASSUMED_IMAGE_BYTES) for key in keys)
    if not project.spec.volumes:
        return MoveNeeds(images=images)
    volumes = tuple(
        volume_needs(volume, backups.volume_status(project.status, volume.name))
        for volume in backups.backed_up(project.spec)
    )
    everies = [volume.every for volume in volumes if volume.every is not None]
    return MoveNeeds(
        images=images,
        volumes=volumes,
        repositories=backups.repositories(project.spec),
        rpo_bytes=sum(volume.rpo_bytes for volume in volumes),
        shortest_every=min(everies) if everies else None,
    )


__all__ = [
    "NO_SIZES",
    "RPO_SNAPSHOTS",
    "image_key",
    "image_sizes",
    "move_needs",
    "node_facts",
    "node_images",
    "parse_rate",
    "restore_rates",
    "volume_needs",
]
