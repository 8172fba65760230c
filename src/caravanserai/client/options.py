"""The connection flags every process shares: `--server`, `--tls-cert`, `--tls-key`, `--tls-ca`, `--token`."""

from __future__ import annotations

import argparse
import os
from typing import Any

from caravanserai.client.client import Client, server_address
from caravanserai.process.tls import TLSFiles


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the connection flags to an argparse parser (defaults from $CARA_SERVER and $CARA_TOKEN)."""
    parser.add_argument(
        "--server",
        default=None,
        help="API server host:port, or several separated by commas (default $CARA_SERVER or 127.0.0.1:7420)",
    )
    parser.add_argument("--tls-cert", default="", help="client certificate (PEM) for mutual TLS")
    parser.add_argument("--tls-key", default="", help="client key (PEM)")
    parser.add_argument("--tls-ca", default="", help="CA bundle that verifies the API server")
    parser.add_argument("--token", default=None, help="bearer token (default $CARA_TOKEN)")


def client_from_args(opts: argparse.Namespace, **kwargs: Any) -> Client:
    """A Client configured from the flags added by `add_client_arguments`."""
    tls = TLSFiles(cert=opts.tls_cert, key=opts.tls_key, ca=opts.tls_ca)
    token = opts.token or os.environ.get("CARA_TOKEN") or None
    return Client(server_address(opts.server), tls=tls if tls.enabled else None, token=token, **kwargs)


__all__ = ["add_client_arguments", "client_from_args"]
