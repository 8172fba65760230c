"""`cara-fence-watchdog`: the node's fence watchdog (`watchdog.FenceWatchdog`), a process of its own beside
`cara-agent`, given the agent's node name, `--fence-dir` and Docker Engine.

    cara-fence-watchdog --node-name node-1 --fence-dir /var/lib/caravanserai/fence

It stops this node's containers when the agent's recorded fence deadline passes without renewal (the agent frozen,
killed or stopped) and does nothing otherwise; SIGTERM and SIGINT stop it. Run it as a unit of its own
(deploy/systemd/cara-fence-watchdog.service), so that nothing that stops the agent stops it.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.fencing.record import FenceFiles
from caravanserai.agent.fencing.watchdog import FenceWatchdog
from caravanserai.clock import SystemClock
from caravanserai.errors import CaravanseraiError
from caravanserai.process.helpformat import DefaultsHelpFormatter
from caravanserai.process.logging import configure_logging
from caravanserai.process.shell import fatal, run_main, until_signalled
from caravanserai.text.addresses import DEFAULT_DOCKER_HOST
from caravanserai.text.selectors import validate_dns_subdomain

PROG = "cara-fence-watchdog"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Stop this node's containers when its agent's fence deadline passes without renewal.",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "--node-name", default=socket.gethostname().lower(), help="the agent's node name (default: hostname)"
    )
    p.add_argument("--fence-dir", required=True, metavar="DIR", help="the agent's --fence-dir")
    p.add_argument("--docker-host", default=DEFAULT_DOCKER_HOST, help="Docker Engine address (unix:// or tcp://)")
    p.add_argument("--log-level", default="info", help="debug, info, warning or error")
    return p


async def run(node: str, fence_dir: Path, docker_host: str) -> None:
    """Watch the record of `node` in `fence_dir` until SIGTERM/SIGINT."""
    async with DockerRuntime.connect(docker_host) as docker:
        watchdog = FenceWatchdog(FenceFiles(fence_dir, node), docker, clock=SystemClock())
        await until_signalled(watchdog.run())


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    problem = validate_dns_subdomain(args.node_name)
    if problem:
        fatal(PROG, f"invalid --node-name {args.node_name!r}: {problem}", code=2)
    configure_logging(args.log_level)
    run_main(PROG, lambda: run(args.node_name, Path(args.fence_dir), args.docker_host), errors=(CaravanseraiError,))
    return 0


__all__ = ["main", "parser", "run"]

if __name__ == "__main__":
    sys.exit(main())
