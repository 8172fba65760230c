"""Agent log helpers: Docker's multiplexed frames, line parsing and merging across containers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caravanserai.agent.access.logs import LogEntry, merge_by_time, merge_live, parse_frame
from caravanserai.agent.docker.engine import FRAME_HEADER, frame_header


def test_frame_header() -> None:
    assert frame_header(FRAME_HEADER.pack(1, 42)) == ("stdout", 42)
    assert frame_header(bytes([2, 0, 0, 0, 0, 0, 1, 0])) == ("stderr", 256)


def test_parse_frame_splits_timestamp_and_strips_newline() -> None:
    entry = parse_frame("2026-01-02T03:04:05.123456789Z hello world\n", service="web", stream="stderr")
    assert entry == LogEntry("2026-01-02T03:04:05.123456789Z", "web", "stderr", "hello world")
    assert entry.to_proto(timestamps=False).data == b"hello world"
    assert entry.to_proto(timestamps=True).data == b"2026-01-02T03:04:05.123456789Z hello world"
    assert entry.to_proto(timestamps=True).stream == "stderr"


def test_parse_frame_without_timestamp_keeps_the_text() -> None:
    entry = parse_frame("plain\n", service="s", stream="stdout")
    assert entry == LogEntry("", "s", "stdout", "plain")
    assert entry.to_proto(timestamps=True).data == b"plain"


def entry(stamp: str, service: str, text: str) -> LogEntry:
    return LogEntry(f"2026-01-01T00:00:{stamp}Z", service, "stdout", text)


def test_merge_by_time_keeps_each_containers_order() -> None:
    a = [entry("01.000000000", "a", "a1"), entry("03.000000000", "a", "a2")]
    # b's own order is kept even where its timestamps are not monotonic (two pipes read by Docker).
    b = [entry("02.000000000", "b", "b1"), entry("00.500000000", "b", "b2"), entry("04.000000000", "b", "b3")]
    merged = [e.text for e in merge_by_time([a, b])]
    assert merged == ["a1", "b1", "b2", "a2", "b3"]
    assert [t for t in merged if t.startswith("b")] == ["b1", "b2", "b3"]


async def test_merge_live_delivers_everything_and_raises_source_errors() -> None:
    async def numbers(prefix: str, count: int) -> AsyncIterator[str]:
        for i in range(count):
            yield f"{prefix}{i}"

    got = [item async for item in merge_live([numbers("a", 3), numbers("b", 2000)])]
    assert sorted(got) == sorted([f"a{i}" for i in range(3)] + [f"b{i}" for i in range(2000)])
    assert [g for g in got if g.startswith("b")] == [f"b{i}" for i in range(2000)]

    async def broken() -> AsyncIterator[str]:
        yield "x"
        raise OSError("stream broke")

    with pytest.raises(OSError, match="stream broke"):
        _ = [item async for item in merge_live([broken(), numbers("c", 1)])]
