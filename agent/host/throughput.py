"""Throughput between the node and the control plane, measured over the apiserver's `Network` service.

Guarantees:

* **What is measured**: download = bytes of one `Download(size)` stream divided by the time from the request
  to its last chunk; upload = bytes of one `Upload` stream divided by the time until the server's summary
  (the bytes the server says it received). Both on the agent's clock (monotonic).
* **Format**: bytes per second as a decimal quantity with one decimal place, e.g. "12.5M", "850k", "1.2G"
  (parseable by `caravanserai.text.quantity`).
* **Advisory**: the scheduler may score on it, never filter. A failed measurement is logged and retried at the
  next interval; it never disturbs anything else.
"""

from __future__ import annotations

import decimal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal

import grpc
import structlog

from caravanserai import v1
from caravanserai.api.v1 import api_pb2
from caravanserai.client import Client
from caravanserai.clock import Clock, timestamp
from caravanserai.errors import CaravanseraiError
from caravanserai.grpcstatus import from_rpc_error

log = structlog.get_logger(__name__)

CHUNK_BYTES = 64 * 1024
MEASURE_TIMEOUT = 60.0
_UNITS = (("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def format_rate(bytes_per_second: float) -> str:
    """A rate as a quantity with at most one decimal: 12_500_000 → "12.5M", 999 → "999", 0 → "0"."""
    value = Decimal(repr(max(0.0, bytes_per_second)))
    for suffix, size in _UNITS:
        if value >= size:
            scaled = (value / size).quantize(Decimal("0.1"), decimal.ROUND_HALF_UP)
            return f"{_plain(scaled)}{suffix}"
    return _plain(value.quantize(Decimal("0.1"), decimal.ROUND_HALF_UP))


def _plain(number: Decimal) -> str:
    text = format(number, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True, slots=True)
class Measurement:
    """One measurement in bytes per second, with the wall-clock time it finished."""

    download: float
    upload: float
    measured_at: float

    def as_throughput(self) -> v1.Throughput:
        return v1.Throughput(
            download=format_rate(self.download),
            upload=format_rate(self.upload),
            measured_at=timestamp(self.measured_at),
        )


class ThroughputMeter:
    """Measures download and upload rates to the apiserver of `client`."""

    def __init__(self, client: Client, *, clock: Clock, size: int = 8 * 1024 * 1024) -> None:
        self._client = client
        self._clock = clock
        self._size = size

    async def download(self) -> float:
        """Bytes per second of one Download stream of `size` bytes."""
        start = self._clock.monotonic()
        received = 0
        try:
            call = await self._client.open_stream(
                self._client.network.Download, api_pb2.DownloadRequest(size=self._size), timeout=MEASURE_TIMEOUT
            )
            async for chunk in call:
                received += len(chunk.data)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc, target=self._client.target) from exc
        return received / max(self._clock.monotonic() - start, 1e-6)

    async def _chunks(self) -> AsyncIterator[api_pb2.Chunk]:
        block = bytes(CHUNK_BYTES)
        remaining = self._size
        while remaining > 0:
            n = min(CHUNK_BYTES, remaining)
            yield api_pb2.Chunk(data=block[:n])
            remaining -= n

    async def upload(self) -> float:
        """Bytes per second of one Upload stream of `size` bytes (as counted by the server)."""
        start = self._clock.monotonic()
        try:
            call = await self._client.open_stream(self._client.network.Upload, self._chunks(), timeout=MEASURE_TIMEOUT)
            summary: api_pb2.UploadSummary = await call
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc, target=self._client.target) from exc
        return summary.received / max(self._clock.monotonic() - start, 1e-6)

    async def measure(self) -> Measurement:
        """Download, then upload; raises the API's error when either fails."""
        down = await self.download()
        up = await self.upload()
        return Measurement(download=down, upload=up, measured_at=self._clock.now())


async def measure_forever(
    meter: ThroughputMeter,
    store: Callable[[v1.Throughput], Awaitable[object]],
    *,
    clock: Clock,
    interval: float,
) -> None:
    """Measure now and every `interval` seconds, storing each result with `store`; failures are logged."""
    while True:
        try:
            result = await meter.measure()
            await store(result.as_throughput())
            log.info("throughput measured", download=format_rate(result.download), upload=format_rate(result.upload))
        except CaravanseraiError as exc:
            log.warning("throughput measurement failed", error=str(exc))
        await clock.sleep(interval)


__all__ = ["CHUNK_BYTES", "Measurement", "ThroughputMeter", "format_rate", "measure_forever"]
