"""What the node holds, for the scheduler's estimates: its images (with sizes) and the download rates its own
restores observed per BackupRepository.

Guarantees:

* `node_images` lists the `MAX_IMAGES` largest images that have a reference (repository:tag or digest), sorted
  by their first one; untagged leftovers are left out (as the kubelet's status lists at most 50). Sizes are
  Docker's. The cap keeps the node's status within the API's limit on repeated fields.
* `restore_rates` formats bytes per second as a quantity with one decimal (`throughput.format_rate`).
* `report_forever` collects and stores both now and then every `interval` seconds, and soon after `wake` is set
  (a restore finished); a failure is logged and retried at the next turn, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping

import structlog

from caravanserai import v1
from caravanserai.agent.docker.records import ImageSummary
from caravanserai.agent.host.throughput import format_rate
from caravanserai.clock import Clock, run_within
from caravanserai.errors import CaravanseraiError

log = structlog.get_logger(__name__)


MAX_IMAGES = 200


def node_images(found: Iterable[ImageSummary]) -> list[v1.NodeImage]:
    """The node's images as `NodeImage`s (see the module docstring)."""
    named = sorted((image for image in found if image.names), key=lambda i: -i.size)[:MAX_IMAGES]
    return [
        v1.NodeImage(names=list(image.names), size_bytes=image.size)
        for image in sorted(named, key=lambda i: i.names[0])
    ]


def restore_rates(rates: Mapping[str, float]) -> dict[str, str]:
    """Bytes per second by repository, as quantity text ("12.5M")."""
    return {name: format_rate(rate) for name, rate in sorted(rates.items())}


async def report_forever(
    collect: Callable[[], Awaitable[tuple[list[v1.NodeImage], dict[str, str]]]],
    store: Callable[[list[v1.NodeImage], dict[str, str]], Awaitable[object]],
    *,
    clock: Clock,
    interval: float,
    wake: asyncio.Event,
) -> None:
    """Collect and store the node's images and restore rates now, every `interval` seconds and when woken."""
    while True:
        wake.clear()
        try:
            images, rates = await collect()
            await store(images, rates)
        except CaravanseraiError as exc:
            log.warning("node inventory not reported", error=str(exc))
        with contextlib.suppress(TimeoutError):
            await run_within(clock, wake.wait(), interval)


__all__ = ["MAX_IMAGES", "node_images", "report_forever", "restore_rates"]
