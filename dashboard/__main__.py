"""`cara-dashboard`: flags and process wiring.

    cara-dashboard [--listen 127.0.0.1:7480] [--server 127.0.0.1:7420] [--read-only]
                   [--allowed-hosts NAME[:PORT],...] [--access-token-file FILE]
                   [--https-cert cert.pem --https-key key.pem | --allow-insecure]
                   [--tls-cert … --tls-key … --tls-ca … | --token …]   # how the dashboard reaches the API

The dashboard listens on loopback by default; a non-loopback `--listen` needs `--https-cert/--https-key` (HTTPS)
or `--allow-insecure`, as the apiserver. Every request needs one of its own Host names and its access token
(`access`): the start line `dashboard serving` prints the URL with the token. SIGTERM and SIGINT stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import web

from caravanserai.client import add_client_arguments, client_from_args
from caravanserai.clock import Clock, SystemClock
from caravanserai.dashboard.access import Access, new_token, parse_allowed_hosts, read_or_make_token
from caravanserai.dashboard.actions import Actions
from caravanserai.dashboard.logstream import LogSource
from caravanserai.dashboard.server import Dashboard
from caravanserai.dashboard.state import ClusterView
from caravanserai.process.logging import configure_logging
from caravanserai.process.shell import run_main, until_signalled
from caravanserai.process.tls import TLSFiles
from caravanserai.text.addresses import Address, is_loopback, parse_address

log = structlog.get_logger(__name__)

PROG = "cara-dashboard"
DEFAULT_LISTEN = "127.0.0.1:7480"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Where and how the dashboard serves (the API side is the client flags)."""

    listen: str = DEFAULT_LISTEN
    https_cert: str = ""
    https_key: str = ""
    allow_insecure: bool = False
    read_only: bool = False
    allowed_hosts: str = ""
    access_token_file: str = ""

    def access(self) -> Access:
        """The Host names and token the dashboard answers to (the token read from, or made into,
        `access_token_file`; a fresh one per start without it). ValueError naming the flag."""
        hosts = parse_allowed_hosts(self.allowed_hosts)
        token = read_or_make_token(Path(self.access_token_file)) if self.access_token_file else new_token()
        return Access(token=token, listen=self.address(), allowed_hosts=hosts)

    def address(self) -> Address:
        """`--listen` as (host, port); ValueError naming the flag when it is not host:port."""
        return parse_address(self.listen, flag="--listen")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The HTTPS context, None for plain HTTP; ValueError when plain HTTP is not allowed on `listen`."""
        if bool(self.https_cert) != bool(self.https_key):
            raise ValueError("--https-cert and --https-key go together")
        if self.https_cert:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.https_cert, self.https_key)
            return context
        if not (is_loopback(self.listen) or self.allow_insecure):
            raise ValueError(
                f"refusing plain HTTP on {self.listen}: give --https-cert/--https-key, or --allow-insecure"
            )
        return None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Serve a live web dashboard of a cluster.")
    add_client_arguments(p)  # --server, --tls-cert, --tls-key, --tls-ca, --token
    p.add_argument("--listen", default=DEFAULT_LISTEN, help="address of the web page (host:port; default %(default)s)")
    p.add_argument("--https-cert", default="", help="certificate (PEM) to serve HTTPS with")
    p.add_argument("--https-key", default="", help="its key (PEM)")
    p.add_argument("--allow-insecure", action="store_true", help="allow plain HTTP on a non-loopback --listen")
    p.add_argument("--read-only", action="store_true", help="hide and refuse every action")
    p.add_argument(
        "--allowed-hosts",
        default="",
        metavar="NAME[:PORT],...",
        help="more Host names to answer to, behind a tunnel or proxy (besides the listen address, localhost, "
        "127.0.0.1 and [::1])",
    )
    p.add_argument(
        "--access-token-file",
        default="",
        metavar="FILE",
        help="read the access token from FILE (made there, mode 0600, when missing); default: a new one per start",
    )
    p.add_argument("--log-level", default="info", help="debug, info, warning or error (default %(default)s)")
    return p


class DashboardProcess:
    """Runs the informers and the web server; `port` is known once `started` is set (listen port 0)."""

    def __init__(self, opts: argparse.Namespace, serve: ServeOptions, *, clock: Clock | None = None) -> None:
        self._opts = opts
        self.serve = serve
        self.clock: Clock = clock or SystemClock()
        self.port = 0
        self.access: Access | None = None
        self.started = asyncio.Event()

    async def run(self) -> None:
        host, port = self.serve.address()
        context = self.serve.ssl_context()
        access = self.access = self.serve.access()
        tls = TLSFiles(cert=self._opts.tls_cert, key=self._opts.tls_key, ca=self._opts.tls_ca)
        token = self._opts.token or os.environ.get("CARA_TOKEN") or None
        async with client_from_args(self._opts) as client:
            state = ClusterView(client, clock=self.clock)
            logs = LogSource(state.get, credentials=tls.channel_credentials() if tls.enabled else None, token=token)
            dashboard = Dashboard(
                state,
                Actions(client, read_only=self.serve.read_only, clock=self.clock),
                logs,
                server=client.target,
                access=access,
            )
            runner = dashboard.runner()
            await runner.setup()
            try:
                await web.TCPSite(runner, host, port, ssl_context=context).start()
                self.port = runner.addresses[0][1]
                access.serving_on(self.port)
                scheme = "https" if context else "http"
                log.info(
                    "dashboard serving",
                    url=access.url(scheme, host),
                    server=client.target,
                    read_only=self.serve.read_only,
                )
                self.started.set()
                await state.run()
            finally:
                await runner.cleanup()


def serve_options(opts: argparse.Namespace) -> ServeOptions:
    return ServeOptions(
        listen=opts.listen,
        https_cert=opts.https_cert,
        https_key=opts.https_key,
        allow_insecure=opts.allow_insecure,
        read_only=opts.read_only,
        allowed_hosts=opts.allowed_hosts,
        access_token_file=opts.access_token_file,
    )


def main(argv: Sequence[str] | None = None) -> int:
    opts = parser().parse_args(argv)
    configure_logging(opts.log_level)
    serve = serve_options(opts)  # checked first thing in run(), before connecting
    run_main(PROG, lambda: until_signalled(DashboardProcess(opts, serve).run()), errors=(ValueError, OSError))
    return 0


__all__ = ["DEFAULT_LISTEN", "DashboardProcess", "ServeOptions", "main", "parser", "serve_options"]

if __name__ == "__main__":
    sys.exit(main())
