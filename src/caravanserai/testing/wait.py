"""`wait_for`: tests assert on resulting state, polled until true or a timeout."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def wait_for(
    predicate: Callable[[], Awaitable[T]], timeout: float = ..., *, interval: float = ..., message: str = ...
) -> T: ...


@overload
async def wait_for(
    predicate: Callable[[], T], timeout: float = ..., *, interval: float = ..., message: str = ...
) -> T: ...


async def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    *,
    interval: float = 0.05,
    message: str = "",
) -> Any:
    """Call `predicate` (sync or async) until it returns something truthy, and return that.

    Exceptions raised by the predicate count as "not yet" until the timeout; then the last one is chained to the
    TimeoutError so a failing test shows why.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result
            last_error = None
        except Exception as exc:  # noqa: BLE001 - reported on timeout
            last_error = exc
        if loop.time() >= deadline:
            text = message or getattr(predicate, "__name__", "condition")
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {text}") from last_error
        await asyncio.sleep(interval)


__all__ = ["wait_for"]
