"""caractrl: the Caravanserai command line, with kubectl's verbs and conventions.

    caractrl [--server ADDR] [-o FORMAT] [-n NS | -A] [--config FILE] [--token T] [--tls-ca/--tls-cert/--tls-key F]
             COMMAND …

`-n/--namespace` and `-A/--all-namespaces` may be typed after the command too, as kubectl users do
(`cli/namespaces.py` moves them before it).

This module is wiring only: the global options, the command list and error handling. Each command lives in its
own module. Every failure a user can cause is one line on stderr and exit status 1 (2 for usage errors);
Ctrl-C exits with 130 and no message.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from caravanserai.cli.apply import apply
from caravanserai.cli.auth import auth
from caravanserai.cli.backups import backup, restore
from caravanserai.cli.common import output_option
from caravanserai.cli.completion import completion
from caravanserai.cli.config import Settings
from caravanserai.cli.convert import convert
from caravanserai.cli.define import define
from caravanserai.cli.delete import delete
from caravanserai.cli.describe import describe
from caravanserai.cli.edit import edit
from caravanserai.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXPECTED_ERRORS, as_command_error, usage_problem
from caravanserai.cli.execcmd import exec_command
from caravanserai.cli.get import get
from caravanserai.cli.logs import logs
from caravanserai.cli.metadata import annotate, label
from caravanserai.cli.namespaces import config, create
from caravanserai.cli.nodes import cordon, drain, uncordon
from caravanserai.cli.patch import patch
from caravanserai.cli.portforward import port_forward
from caravanserai.cli.restart import restart
from caravanserai.cli.rollout import rollout, scale
from caravanserai.cli.schema import schema
from caravanserai.cli.scope import check_namespace, hoist
from caravanserai.cli.version import VERSION, version
from caravanserai.cli.wait import wait

# The commands that take `-A/--all-namespaces` (others refuse it rather than ignore it).
ALL_NAMESPACES_COMMANDS = ("get", "auth")
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
_PATH = click.Path(dir_okay=False, path_type=Path)


class CaractrlGroup(click.Group):
    """A click group that turns expected exceptions of any command into one `error: …` line (exit 1)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, hoist(args), parent, **extra)
        except click.UsageError as exc:
            raise usage_problem(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise usage_problem(exc) from exc
        except BrokenPipeError:  # `caractrl get … | head`: the reader is gone, nothing to report
            _silence_stdout()
            ctx.exit(EXIT_FAILURE)
        except EXPECTED_ERRORS as exc:
            raise as_command_error(exc) from exc
        except KeyboardInterrupt:
            ctx.exit(EXIT_INTERRUPTED)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@click.group(cls=CaractrlGroup, context_settings=CONTEXT_SETTINGS)
@click.option(
    "-s",
    "--server",
    metavar="HOST:PORT",
    help="API server address, or several separated by commas [env CARA_SERVER; default 127.0.0.1:7420].",
)
@output_option()
@click.option(
    "-n",
    "--namespace",
    metavar="NS",
    envvar="CARA_NAMESPACE",
    callback=lambda ctx, param, value: check_namespace(value),
    help="Namespace of the objects named [env CARA_NAMESPACE; default: the config file's, else default].",
)
@click.option(
    "-A", "--all-namespaces", is_flag=True, help="get: list the objects of every namespace (NAMESPACE column first)."
)
@click.option(
    "--config",
    "config_path",
    type=_PATH,
    envvar="CARA_CONFIG",
    help="Config file [env CARA_CONFIG; default $XDG_CONFIG_HOME/caravanserai/config.yaml].",
)
@click.option("--token", envvar="CARA_TOKEN", help="Bearer token sent with every call [env CARA_TOKEN].")
@click.option("--tls-ca", type=_PATH, help="CA certificate (PEM) to verify the server with; enables TLS.")
@click.option("--tls-cert", type=_PATH, help="Client certificate (PEM) for mutual TLS.")
@click.option("--tls-key", type=_PATH, help="Client private key (PEM) for mutual TLS.")
@click.version_option(VERSION, "--version", prog_name="caractrl", message="%(prog)s %(version)s")
@click.pass_context
def caractrl(
    ctx: click.Context,
    server: str | None,
    output: str | None,
    namespace: str | None,
    all_namespaces: bool,
    config_path: Path | None,
    token: str | None,
    tls_ca: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> None:
    """Control a Caravanserai cluster: projects, nodes, events and leases."""
    if all_namespaces and ctx.invoked_subcommand not in ALL_NAMESPACES_COMMANDS:
        raise click.UsageError(f"-A/--all-namespaces lists objects: use it with {' or '.join(ALL_NAMESPACES_COMMANDS)}")
    ctx.obj = Settings(
        server=server,
        output=output.lower() if output else None,
        token=token,
        config_path=config_path,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        namespace=namespace,
        all_namespaces=all_namespaces,
    )


for command in (
    annotate,
    apply,
    auth,
    backup,
    completion,
    config,
    convert,
    create,
    cordon,
    define,
    delete,
    describe,
    drain,
    edit,
    exec_command,
    get,
    label,
    logs,
    patch,
    port_forward,
    restart,
    restore,
    rollout,
    scale,
    schema,
    uncordon,
    version,
    wait,
):
    caractrl.add_command(command)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (`caractrl` and its alias `caractl`)."""
    prog = Path(sys.argv[0]).name if argv is None and sys.argv else "caractrl"
    caractrl.main(args=list(argv) if argv is not None else None, prog_name=prog or "caractrl")


__all__ = ["CaractrlGroup", "caractrl", "main"]
