"""Plain HTTP GETs for tests (blocking: run them with `asyncio.to_thread`), the one home of "fetch this URL" in the
suite.

Guarantee: the connection is closed when the call returns or raises, whatever the answer. `urllib` raises an
error status as an `HTTPError` that holds the open response; a test that drops it (a retried fetch that got a 502
while a route spreads, say) leaves the socket to the garbage collector, whose "unclosed socket" warning then fails
whichever later test the collection happens to run in.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer: its status, headers and whole body."""

    status: int
    headers: Message
    body: bytes


def get(url: str, *, headers: Mapping[str, str] | None = None, timeout: float = 5.0) -> Reply:
    """GET `url` (an address the test made): the answer, error statuses included. Raises `OSError` (URLError,
    ConnectionError, TimeoutError) when nothing answers."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - a test's own address
            return Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return Reply(exc.code, exc.headers, exc.read())


def get_ok(url: str, *, headers: Mapping[str, str] | None = None, timeout: float = 5.0) -> bytes:
    """The body of `url`'s 200 answer; `OSError` for any other answer, or none (a retrying caller's "not yet")."""
    reply = get(url, headers=headers, timeout=timeout)
    if reply.status != 200:
        raise ConnectionError(f"GET {url}: {reply.status} {reply.body[:200]!r}")
    return reply.body
