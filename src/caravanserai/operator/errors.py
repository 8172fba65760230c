"""What a handler returns or raises to say how it went, without a traceback in the log.

* `return None` (or nothing): done; a change handler is not called again for this state of the object.
* `return Requeue(after=s)`: not done yet, nothing failed (waiting for something): called again after `s` seconds.
* `raise TemporaryError(message, delay=s)`: failed for now: logged as a warning (one line) and called again after
  `s` seconds (default 60).
* `raise PermanentError(message)`: failed for good: logged as an error (one line) and not called again for this
  state of the object (a change of it runs the handlers again). A delete handler's PermanentError gives up the
  cleanup: the finalizer is removed.
* Any other exception is a bug: logged with its traceback and retried with the controller's rate limiter.
"""

from __future__ import annotations

from dataclasses import dataclass

from caravanserai.errors import CaravanseraiError

DEFAULT_RETRY_DELAY = 60.0


@dataclass(frozen=True, slots=True)
class Requeue:
    """A handler's result: call it again after `after` seconds (for a timer: run next after `after` seconds)."""

    after: float


class HandlerError(CaravanseraiError):
    """Base of the errors a handler raises to steer its retries."""


class TemporaryError(HandlerError):
    """Retry the handler after `delay` seconds; logged as one line, without a traceback."""

    def __init__(self, message: str = "", *, delay: float = DEFAULT_RETRY_DELAY) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(HandlerError):
    """Give up on the handler for this state of the object; logged as one line, without a traceback."""


__all__ = ["DEFAULT_RETRY_DELAY", "HandlerError", "PermanentError", "Requeue", "TemporaryError"]
