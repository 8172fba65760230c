"""cara-apiserver: serve the Caravanserai API from etcd.

    cara-apiserver [--etcd-endpoints http://127.0.0.1:2379] [--etcd-prefix /caravanserai] [--listen 127.0.0.1:7420]
                   [--metrics-listen 127.0.0.1:7423|off] [--workers 1]

With `--workers N` (N > 1) this process is a supervisor of N apiserver processes on the same address
(`apiserver/workers.py`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import structlog

from caravanserai.apiserver.server import ApiServer, ApiServerConfig
from caravanserai.apiserver.workers import WorkerFailed, WorkerSupervisor
from caravanserai.errors import Unavailable
from caravanserai.process.helpformat import DefaultsHelpFormatter
from caravanserai.process.logging import configure_logging
from caravanserai.process.shell import fatal, run_main, until_signalled
from caravanserai.process.tls import TLSFiles
from caravanserai.text.addresses import parse_address
from caravanserai.text.durations import parse_duration
from caravanserai.text.quantity import to_int

PROG = "cara-apiserver"
SERVER_ERRORS = (ValueError, OSError, Unavailable)
"""Start-up errors of a server that end it in one line: bad flags or files, a port taken, etcd unreachable."""
SUPERVISOR_ERRORS = (WorkerFailed, ValueError, OSError)
"""The same for the supervisor of `--workers N`: a worker that could not start, bad flags, a port taken."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Serve the Caravanserai API from etcd.", formatter_class=DefaultsHelpFormatter
    )
    p.add_argument("--etcd-endpoints", default="http://127.0.0.1:2379", help="comma-separated etcd client URLs")
    p.add_argument("--etcd-prefix", default="/caravanserai", help="key prefix of every object in etcd")
    p.add_argument("--listen", default="127.0.0.1:7420", help="address to serve gRPC on (host:port)")
    p.add_argument("--bookmark-interval", type=parse_duration, default=10.0, help="watch bookmark interval")
    p.add_argument(
        "--compaction-interval",
        type=parse_duration,
        default=300.0,
        help="how often etcd is compacted (by one apiserver per interval; one interval of history kept); 0 disables",
    )
    p.add_argument("--shutdown-grace", type=parse_duration, default=5.0, help="time in-flight calls get on SIGTERM")
    p.add_argument(
        "--shutdown-delay",
        type=parse_duration,
        default=0.0,
        help="on SIGTERM, time served while the health service says NOT_SERVING, before new calls are refused "
        "(clients given several apiservers then send theirs to the others; 1s when running several)",
    )
    _add_tls_arguments(p)
    p.add_argument("--allow-insecure", action="store_true", help="allow plain TCP on a non-loopback address")
    p.add_argument(
        "--watch-history-kind-bytes",
        type=_bytes,
        default="256Mi",
        help="bytes of one kind's watch history (oldest changes dropped; a watcher behind them relists)",
    )
    p.add_argument(
        "--watch-history-bytes", type=_bytes, default="1Gi", help="bytes of every kind's watch history together"
    )
    p.add_argument("--max-inflight", type=int, default=400, help="requests in flight before RESOURCE_EXHAUSTED")
    p.add_argument("--max-inflight-per-client", type=int, default=100, help="the same, per client")
    p.add_argument(
        "--metrics-listen",
        default="127.0.0.1:7423",
        help="address of /metrics, /healthz and /readyz (host:port; off disables them)",
    )
    p.add_argument("--workers", type=int, default=1,
                   help="apiserver processes sharing --listen (SO_REUSEPORT); more than 1 starts a supervisor that "
                        "serves --metrics-listen over them")  # fmt: skip
    p.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)  # set by the supervisor
    p.add_argument("--log-level", default="info")
    return p


def _add_tls_arguments(p: argparse.ArgumentParser) -> None:
    """Certificates, keys and tokens: towards etcd, of the gRPC server, and the encryption of Secrets at rest."""
    p.add_argument("--etcd-cafile", default="", help="CA bundle verifying https:// etcd members")
    p.add_argument("--etcd-certfile", default="", help="client certificate (PEM) for etcd")
    p.add_argument("--etcd-keyfile", default="", help="client key (PEM) for etcd")
    p.add_argument("--tls-cert", default="", help="server certificate (PEM)")
    p.add_argument("--tls-key", default="", help="server key (PEM)")
    p.add_argument("--tls-ca", default="", help="CA bundle: client certificates are required and verified")
    p.add_argument("--token-file", default="", help="bearer tokens: CSV lines token,user[,group;group]")
    p.add_argument(
        "--token-listen", default="", help="extra TLS address for bearer-token clients (no client certificate)"
    )
    p.add_argument(
        "--encryption-key-file",
        default="",
        help="encrypt Secrets in etcd (AES-GCM): lines '<key id> <base64 32-byte key>', the first one writes",
    )


def _bytes(text: str) -> int:
    """A positive byte count such as "256Mi" or "1G" (argparse turns the ValueError into one line)."""
    value = to_int(text)
    if value <= 0:
        raise ValueError(f"{text!r}: must be positive")
    return value


_bytes.__name__ = "byte count"


def _check_workers(opts: argparse.Namespace) -> None:
    """Refuse a worker count the supervisor cannot serve (one line naming the flag)."""
    if opts.workers < 1:
        fatal(PROG, f"--workers: must be at least 1, got {opts.workers}")
    if opts.workers > 1 and _port(opts.listen) == 0:
        fatal(
            PROG, f"--workers: {opts.workers} workers share one address; give --listen a fixed port, not {opts.listen}"
        )


def _port(listen: str) -> int:
    try:
        return parse_address(listen, flag="--listen").port
    except ValueError as exc:
        fatal(PROG, exc)


def _config(opts: argparse.Namespace) -> ApiServerConfig:
    """The configuration of one apiserver (or worker) process from its flags."""
    return ApiServerConfig(
        etcd_endpoints=[e.strip() for e in opts.etcd_endpoints.split(",") if e.strip()],
        etcd_prefix=opts.etcd_prefix,
        listen=opts.listen,
        bookmark_interval=opts.bookmark_interval,
        compaction_interval=opts.compaction_interval,
        grace=opts.shutdown_grace,
        shutdown_delay=opts.shutdown_delay,
        tls=TLSFiles(cert=opts.tls_cert, key=opts.tls_key, ca=opts.tls_ca),
        etcd_tls=TLSFiles(cert=opts.etcd_certfile, key=opts.etcd_keyfile, ca=opts.etcd_cafile),
        token_file=opts.token_file,
        token_listen=opts.token_listen,
        encryption_key_file=opts.encryption_key_file,
        allow_insecure=opts.allow_insecure,
        max_inflight=opts.max_inflight,
        history_kind_bytes=opts.watch_history_kind_bytes,
        history_bytes=opts.watch_history_bytes,
        max_inflight_per_client=opts.max_inflight_per_client,
        metrics_listen=opts.metrics_listen,
        worker=opts.worker_index,
    )


def _supervisor(argv: Sequence[str], opts: argparse.Namespace) -> WorkerSupervisor:
    return WorkerSupervisor(argv, workers=opts.workers, metrics_listen=opts.metrics_listen,
                            allow_insecure=opts.allow_insecure,
                            grace=opts.shutdown_delay + opts.shutdown_grace)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    opts = _parser().parse_args(args)
    _check_workers(opts)
    configure_logging(opts.log_level)
    if opts.workers > 1:
        run_main(PROG, lambda: until_signalled(_supervisor(args, opts).run()), errors=SUPERVISOR_ERRORS)
        return
    if opts.worker_index is not None:
        structlog.contextvars.bind_contextvars(worker=opts.worker_index)
    run_main(PROG, lambda: until_signalled(ApiServer(_config(opts)).run()), errors=SERVER_ERRORS)


if __name__ == "__main__":
    main()
