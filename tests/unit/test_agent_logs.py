"""Agent log helpers: frame parsing, timestamps for `since`, merging and tail."""

from __future__ import annotations

import pytest

from caravanserai.agent.logs import LogEntry, parse_frame, select_tail, unix_time


def test_parse_frame_splits_timestamp_and_strips_newline() -> None:
    entry = parse_frame("2026-01-02T03:04:05.123456789Z hello world\n", service="web", stream="stderr")
    assert entry == LogEntry("2026-01-02T03:04:05.123456789Z", "web", "stderr", "hello world")
    assert entry.to_proto(timestamps=False).data == b"hello world"
    assert entry.to_proto(timestamps=True).data == b"2026-01-02T03:04:05.123456789Z hello world"
    assert entry.to_proto(timestamps=True).stream == "stderr"


def test_parse_frame_without_timestamp_keeps_the_text() -> None:
    assert parse_frame("plain\n", service="s", stream="stdout") == LogEntry("", "s", "stdout", "plain")


@pytest.mark.parametrize(
    ("stamp", "since"),
    [
        ("1970-01-01T00:00:01.000000001Z", "1.000000001"),
        ("2026-01-02T03:04:05.5Z", "1767323045.500000000"),
        ("2026-01-02T03:04:05Z", "1767323045.000000000"),
    ],
)
def test_unix_time(stamp: str, since: str) -> None:
    assert unix_time(stamp) == since


def test_select_tail_merges_by_time() -> None:
    entries = [
        LogEntry("2026-01-01T00:00:03.000000000Z", "a", "stdout", "3"),
        LogEntry("2026-01-01T00:00:01.000000000Z", "b", "stderr", "1"),
        LogEntry("2026-01-01T00:00:02.000000000Z", "a", "stdout", "2"),
    ]
    assert [e.text for e in select_tail(entries, -1)] == ["1", "2", "3"]
    assert [e.text for e in select_tail(entries, 2)] == ["2", "3"]
    assert select_tail(entries, 0) == []
    assert [e.text for e in select_tail(entries, 10)] == ["1", "2", "3"]
