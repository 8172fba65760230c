"""How caractrl reports failures: one line on stderr, never a traceback.

    error: cannot reach the Caravanserai API server at 127.0.0.1:7420: …       (exit 1)
    Error from server (NotFound): projects "web" not found                     (exit 1)
    Error from server (Invalid): project "web" is invalid: spec.services[0].image: is required
    error: no such option: --bogus                                             (usage: exit 2, from click)

`describe_error` turns any exception caractrl expects (`CaravanseraiError`, `OSError`, `ValueError`) into that
line; `CommandError` is the `click.ClickException` carrying it, so click's own machinery (and `CliRunner` in
tests) prints it and exits with the right code.
"""

from __future__ import annotations

from typing import IO, Any

import click
import grpc

from caravanserai.errors import ApiError, CaravanseraiError, Invalid, NotFound, Unavailable

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Exceptions a command may raise that describe a user-facing failure rather than a bug.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (CaravanseraiError, OSError, ValueError)


class CommandError(click.ClickException):
    """A failure already worded for the user; `show` prints it as is (no "Error: " prefix added by click)."""

    exit_code = EXIT_FAILURE

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.format_message(), err=True)


class PartialFailure(CommandError):
    """Some items of a command failed and were already reported one by one; only the exit code is left."""

    def __init__(self) -> None:
        super().__init__("")

    def show(self, file: IO[Any] | None = None) -> None:
        return None


class UsageProblem(click.UsageError):
    """A usage error shown as `error: …` plus a pointer to the command's help (exit 2)."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", err=True)
        if self.ctx is not None:
            click.echo(f"See '{self.ctx.command_path} --help' for usage.", err=True)


def usage_problem(exc: click.UsageError) -> UsageProblem:
    """`exc` re-worded as caractrl shows usage errors (same message and context; exit status 2)."""
    return UsageProblem(exc.format_message(), exc.ctx)


def not_found(plural: str, name: str) -> NotFound:
    """The kubectl wording of a missing object: `projects "web" not found`."""
    return NotFound(f'{plural} "{name}" not found')


def invalid(kind: str, name: str, err: Invalid) -> str:
    """`project "web" is invalid: spec.services[0].image: is required; …` (falls back to the server's text)."""
    if not err.violations:
        return err.message
    fields = "; ".join(str(v) for v in err.violations)
    return f'{kind.lower()} "{name}" is invalid: {fields}' if name else f"{kind.lower()} is invalid: {fields}"


def reason(exc: ApiError) -> str:
    """kubectl's name for the kind of refusal: NotFound, Conflict, Invalid, Unauthorized …"""
    return "Unauthorized" if exc.code == grpc.StatusCode.UNAUTHENTICATED else type(exc).__name__


def describe_error(exc: BaseException) -> str:
    """The one line shown for `exc`."""
    if isinstance(exc, Unavailable):
        return f"error: {exc.message}"
    if isinstance(exc, ApiError):
        return f"Error from server ({reason(exc)}): {exc.message}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"error: {exc.strerror or exc}: {exc.filename}"
    text = str(exc) or type(exc).__name__
    return text if text.startswith("error: ") else f"error: {text}"


def one_line(text: str) -> str:
    """`text` with newlines folded, so a message never spans several lines."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def as_command_error(exc: BaseException) -> CommandError:
    """The CommandError reporting `exc`."""
    return CommandError(one_line(describe_error(exc)))


def report(exc: BaseException) -> None:
    """Print the line for `exc` on stderr now (used when a command goes on after one item failed)."""
    click.echo(one_line(describe_error(exc)), err=True)


__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "EXPECTED_ERRORS",
    "CommandError",
    "PartialFailure",
    "UsageProblem",
    "as_command_error",
    "describe_error",
    "invalid",
    "not_found",
    "one_line",
    "reason",
    "report",
    "usage_problem",
]
