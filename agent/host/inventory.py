"""What the node holds, for the scheduler's estimates: its images (with sizes) and the download rates its own
restores observed per BackupRepository.

Guarantees:

* `node_images` lists every image that has a reference (repository:tag or digest), sorted by its first one;
  untagged leftovers are left out. Sizes are Docker's.
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


def node_images(found: Iterable[ImageSummary]) -> list[v1.NodeImage]:
    """The node's images as `NodeImage`s (see the module docstring)."""
    named = [image for image in found if image.names]
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


__all__ = ["node_images", "report_forever", "restore_rates"]
