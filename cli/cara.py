"""`cara up` / `cara down` / `cara status`: a whole Caravanserai cluster on this machine with one command.

`cara up` starts a supervisor in the background that runs etcd (data under `--data-dir`), the apiserver, the
controller manager (scheduler, node health, gc) and an agent for the local Docker engine, restarting any that
dies; it returns once the API answers (and the local node is Ready). State survives `cara down` + `cara up`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import CaravanseraiError

STATE_FILE = "cara.json"


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "caravanserai"


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_state(data_dir: Path) -> dict | None:  # type: ignore[type-arg]
    path = data_dir / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if _alive(int(state.get("supervisor_pid", 0))) else None


def _check_prerequisites(agent: bool) -> None:
    if shutil.which("etcd") is None:
        _fail("etcd is not installed: install the Debian package etcd-server (apt-get install etcd-server)")
    if not agent:
        return
    if shutil.which("docker") is None and shutil.which("dockerd") is None:
        _fail("Docker is not installed: install the Debian package docker.io, or run `cara up --no-agent`")
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    if probe.returncode != 0:
        _fail("the Docker engine does not answer: start dockerd (scripts/start-dockerd.sh), or run `cara up --no-agent`")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


async def _wait_ready(address: str, node: str | None, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    last = "the API server did not answer"
    async with Client(address, timeout=5, retry_timeout=0) as c:
        while time.monotonic() < deadline:
            try:
                await c.projects.list(limit=1)
                if node is None:
                    return ""
                n = await c.nodes.get(node)
                if n.status.state == v1.NODE_READY:
                    return ""
                last = f"node {node} is not Ready yet"
            except CaravanseraiError as exc:
                last = str(exc)
            await asyncio.sleep(0.5)
    return last


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Run a whole Caravanserai cluster on this machine."""


@cli.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where etcd data and logs live (default ~/.local/share/caravanserai)")
@click.option("--listen", default="127.0.0.1:7420", show_default=True, help="API server address")
@click.option("--etcd-port", default=23790, show_default=True, help="etcd client port (peer port is +1)")
@click.option("--no-agent", is_flag=True, help="do not run an agent (no local Docker engine)")
@click.option("--node-name", default=None, help="name of the local node (default: the host name)")
@click.option("--agent-listen", default="127.0.0.1:7421", show_default=True, help="agent log service address")
@click.option("--timeout", default=90.0, show_default=True, help="seconds to wait for the cluster to answer")
def up(data_dir: Path | None, listen: str, etcd_port: int, no_agent: bool, node_name: str | None,
       agent_listen: str, timeout: float) -> None:
    """Start etcd, the API server, the controllers and an agent; return once the cluster answers."""
    data = (data_dir or default_data_dir()).expanduser().resolve()
    node = (node_name or socket.gethostname().split(".")[0].lower()) if not no_agent else None
    state = _read_state(data)
    if state is None:
        _check_prerequisites(agent=not no_agent)
        for port in (int(listen.rsplit(":", 1)[1]), etcd_port, etcd_port + 1):
            if not _port_free(port):
                _fail(f"port {port} is already in use; choose others with --listen / --etcd-port")
        _spawn(data, {
            "data_dir": str(data), "api_listen": listen, "etcd_client_port": etcd_port,
            "etcd_peer_port": etcd_port + 1, "agent": not no_agent, "agent_listen": agent_listen,
            "node_name": node or "",
        })
    else:
        listen = state["spec"]["api_listen"]
        node = state["spec"]["node_name"] or None
        click.echo(f"Caravanserai is already running (supervisor pid {state['supervisor_pid']}).")
    problem = asyncio.run(_wait_ready(listen, node, timeout))
    if problem:
        _fail(f"the cluster did not become ready within {timeout:g}s: {problem} (logs in {data / 'logs'})")
    click.echo(f"Caravanserai is up: API at {listen}; data and logs in {data}.")
    click.echo(f"Try: caractrl --server {listen} apply -f examples/hello.yaml && caractrl get projects")


def _spawn(data: Path, spec: dict) -> None:  # type: ignore[type-arg]
    (data / "logs").mkdir(parents=True, exist_ok=True)
    with open(data / "logs" / "supervisor.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "caravanserai.cli.supervisor", json.dumps(spec)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _fail(f"the supervisor exited at once (code {proc.returncode}); see {data / 'logs' / 'supervisor.log'}")
        if (data / STATE_FILE).exists():
            return
        time.sleep(0.1)
    _fail(f"the supervisor did not start; see {data / 'logs' / 'supervisor.log'}")


@cli.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--timeout", default=30.0, show_default=True, help="seconds to wait before killing")
def down(data_dir: Path | None, timeout: float) -> None:
    """Stop the local cluster (its data stays for the next `cara up`)."""
    data = (data_dir or default_data_dir()).expanduser().resolve()
    state = _read_state(data)
    if state is None:
        click.echo("Caravanserai is not running.")
        return
    pid = int(state["supervisor_pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything left in the supervisor's session
    except (ProcessLookupError, PermissionError):
        pass
    click.echo("Caravanserai is down.")


@cli.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def status(data_dir: Path | None) -> None:
    """Show the local cluster's processes and whether the API answers."""
    data = (data_dir or default_data_dir()).expanduser().resolve()
    state = _read_state(data)
    if state is None:
        click.echo("Caravanserai is not running.")
        sys.exit(3)
    click.echo(f"supervisor   pid {state['supervisor_pid']}   data {data}")
    for name, child in state["children"].items():
        mark = "running" if _alive(int(child["pid"])) else "down"
        click.echo(f"{name:<19}pid {child['pid']:<8} {mark:<8} restarts {child['restarts']}")
    listen = state["spec"]["api_listen"]
    problem = asyncio.run(_wait_ready(listen, None, 3))
    click.echo(f"API {listen}: {'answering' if not problem else problem}")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
