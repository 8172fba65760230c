"""Which copy of a Persistent volume's data is current.

`status.volumes[v].epoch` = `"<node>/<8 random hex digits>"` names the one current copy; the Docker volume that
holds a copy carries it as the label `caravanserai.io/epoch` from its creation (labels never change: a new copy
is a new volume).

Guarantees (pure, except `new_epoch`'s randomness):

* **Current** (`is_current`): a local volume is current iff the status names this node and an epoch, and the
  volume's epoch is that epoch. The status epoch is written only once a copy is complete (restored, or made
  empty), so a half-restored volume (an agent killed mid-restore) never is current, nor is a copy left on a node
  the project moved away from.
* **Unlabelled** volumes (made before epochs existed) read as the epoch `"<node>/unlabelled"`: adopted once,
  they are then current like any other.
* **Adoptable** (`adoptable`): a local volume the status says nothing about (no node recorded) may be taken as
  it is instead of being wiped: the data there is the only copy anyone knows of.
"""

from __future__ import annotations

import secrets

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import VolumeInfo

UNLABELLED = "unlabelled"


def new_epoch(node: str) -> str:
    """A fresh epoch for a new copy of a volume on `node`."""
    return f"{node}/{secrets.token_hex(4)}"


def local_epoch(volume: VolumeInfo, node: str) -> str:
    """The epoch of a local Docker volume (its label, or `<node>/unlabelled`)."""
    return volume.label(naming.LABEL_EPOCH) or f"{node}/{UNLABELLED}"


def is_current(volume: VolumeInfo | None, status: v1.VolumeStatus | None, node: str) -> bool:
    """Whether `volume` (None: there is none) on `node` holds the copy `status` names as current."""
    if volume is None or status is None or not status.epoch or status.node != node:
        return False
    return local_epoch(volume, node) == status.epoch


def adoptable(volume: VolumeInfo | None, status: v1.VolumeStatus | None) -> bool:
    """Whether a local volume exists that the status says nothing about (no node holds the data yet)."""
    return volume is not None and (status is None or not status.node)


__all__ = ["UNLABELLED", "adoptable", "is_current", "local_epoch", "new_epoch"]
