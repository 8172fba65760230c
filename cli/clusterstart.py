"""Starting a local cluster for `cara up`: its prerequisites (etcd, Docker, free ports), the supervisor, and the
lines `cara up` ends with.

Every check fails with one line (`error: …` on stderr, exit 1) that names the flag or the package to install.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import NoReturn

import click
from click.core import ParameterSource

from caravanserai.cli import localpki
from caravanserai.cli.localcluster import (
    ETCD_MISSING,
    command_name,
    default_data_dir,
    docker_problem,
    leftover_processes,
    port_problem,
    stop_processes,
)
from caravanserai.cli.supervisor import (
    DASHBOARD_TOKEN_FILE,
    STATE_FILE,
    SUPERVISOR_MODULE,
    ClusterSpec,
    cluster_env,
)
from caravanserai.client import DEFAULT_SERVER
from caravanserai.text.addresses import OFF, Address, parse_address
from caravanserai.text.selectors import validate_dns_subdomain


def fail(message: str) -> NoReturn:
    """Print `error: <message>` on stderr and exit 1."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def split_address(address: str) -> Address:
    """A `cara up` address: host:port with a fixed port (it is checked free, and shown)."""
    return parse_address(address, port_zero=False)


# ---------------------------------------------------------------------------------------------- prerequisites


def etcd_binary() -> str:
    """The absolute path of `etcd`; exits with the package to install when it is missing."""
    path = shutil.which("etcd")
    if path is None:
        fail(ETCD_MISSING)
    return path


def check_ports(spec: ClusterSpec) -> None:
    """Exit with a clear message when two components share a port or a port is taken."""
    wanted = {
        "--listen": split_address(spec.api_listen),
        "--etcd-port": ("127.0.0.1", spec.etcd_client_port),
        "--etcd-peer-port": ("127.0.0.1", spec.etcd_peer_port),
    }
    if spec.metrics_listen != OFF:
        wanted["--metrics-listen"] = split_address(spec.metrics_listen)
    if spec.agent:
        wanted["--agent-listen"] = split_address(spec.agent_listen)
        wanted["--agent-health-listen"] = split_address(spec.agent_health_listen)
        if spec.ingress_listen != OFF:
            wanted["--ingress-listen"] = split_address(spec.ingress_listen)
    if spec.dashboard:
        wanted["--dashboard-listen"] = split_address(spec.dashboard_listen)
    seen: dict[int, str] = {}
    for flag, (host, port) in wanted.items():
        if port in seen:
            fail(f"{flag} and {seen[port]} both use port {port}")
        seen[port] = flag
        problem = port_problem(host, port)
        if problem:
            fail(f"cannot listen on {host}:{port} ({flag}): {problem}; choose another port with {flag}")


# ---------------------------------------------------------------------------------------------- starting


def spawn_supervisor(data: Path, spec: ClusterSpec) -> None:
    """Start the supervisor in its own session and wait until it has written its state file."""
    (data / "logs").mkdir(parents=True, exist_ok=True)
    (data / STATE_FILE).unlink(missing_ok=True)  # a file left by a killed supervisor must not count as started
    with open(data / "logs" / "supervisor.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", SUPERVISOR_MODULE, json.dumps(asdict(spec))],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            cwd=data,
            env=cluster_env(data),
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"the supervisor exited at once (code {proc.returncode}); see {data / 'logs' / 'supervisor.log'}")
        if (data / STATE_FILE).exists():
            return
        time.sleep(0.1)
    fail(f"the supervisor did not start; see {data / 'logs' / 'supervisor.log'}")


def new_dashboard_token(path: Path) -> None:
    """A fresh access token for the dashboard (256 random bits) in `path`, readable by its owner only."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")


def dashboard_url(spec: ClusterSpec) -> str:
    """The dashboard's URL with its access token (without it when the token file is unreadable)."""
    try:
        token = (Path(spec.data_dir) / DASHBOARD_TOKEN_FILE).read_text().strip()
    except OSError:
        token = ""
    return f"http://{spec.dashboard_listen}/" + (f"?token={token}" if token else "")


def next_steps(spec: ClusterSpec) -> list[str]:
    """The lines `cara up` ends with: what to try next and how to stop."""
    ctl = command_name("caractrl")
    if spec.api_listen != DEFAULT_SERVER:
        ctl += f" --server {spec.api_listen}"
    lines = [f"Next: {ctl} get nodes"]
    if spec.dashboard:
        lines.append(f"      open {dashboard_url(spec)} (the live dashboard)")
    if not spec.agent:
        lines.append(
            f"No agent runs here: projects stay Pending until a node joins (cara-agent --server "
            f"{spec.api_listen} --node-name NAME on a machine with Docker)."
        )
    elif Path("examples/hello.yaml").is_file():
        lines.append(f"      {ctl} apply -f examples/hello.yaml && {ctl} wait project hello --for phase=Running")
    if not spec.insecure:
        config = Path(spec.data_dir) / localpki.CLIENT_CONFIG
        lines.append(f"Admin: {config} (caractrl finds it; the API, etcd and the agent require certificates)")
    data = "" if Path(spec.data_dir) == default_data_dir().resolve() else f" --data-dir {spec.data_dir}"
    lines.append(f"Stop: {command_name('cara')} down{data} (the cluster's state is kept for the next cara up)")
    return lines


def ignored_flags(ctx: click.Context, running: ClusterSpec, asked: ClusterSpec) -> list[str]:
    """Flags given on the command line that differ from the running cluster's settings."""
    fields = {
        "listen": "api_listen",
        "etcd_port": "etcd_client_port",
        "etcd_peer_port": "etcd_peer_port",
        "no_agent": "agent",
        "node_name": "node_name",
        "agent_listen": "agent_listen",
        "metrics_listen": "metrics_listen",
        "agent_health_listen": "agent_health_listen",
        "no_dashboard": "dashboard",
        "dashboard_listen": "dashboard_listen",
        "docker_host": "docker_host",
        "ingress_listen": "ingress_listen",
        "insecure": "insecure",
    }
    ignored = [
        f"--{param.replace('_', '-')}"
        for param, attr in fields.items()
        if ctx.get_parameter_source(param) == ParameterSource.COMMANDLINE
        and getattr(running, attr) != getattr(asked, attr)
    ]
    flags = {"config": "--config", "assignments": "--set"}
    given = [flag for p, flag in flags.items() if ctx.get_parameter_source(p) == ParameterSource.COMMANDLINE]
    settings = (running.controller_flags, running.agent_flags) != (asked.controller_flags, asked.agent_flags)
    return ignored + (given if settings else [])


def start(data: Path, spec: ClusterSpec) -> None:
    """Check everything `cara up` needs, clear what a killed supervisor left, then start the supervisor."""
    if spec.agent:
        problem = validate_dns_subdomain(spec.node_name)
        if problem:
            fail(f"invalid node name {spec.node_name!r}: {problem}; choose one with --node-name")
    spec.etcd_binary = etcd_binary()
    if spec.agent:
        problem = docker_problem(spec.docker_host)
        if problem:
            fail(problem)
    leftovers = leftover_processes(data)
    if leftovers:
        click.echo(
            f"Stopping {len(leftovers)} processes left by a previous run (pids {' '.join(map(str, leftovers))})."
        )
        stop_processes(leftovers, grace=10.0)
    check_ports(spec)
    credentials(data, spec)
    if spec.dashboard:
        new_dashboard_token(data / DASHBOARD_TOKEN_FILE)
    spawn_supervisor(data, spec)


def credentials(data: Path, spec: ClusterSpec) -> None:
    """The cluster's CA, certificates, encryption key and admin client config (`localpki`), made when missing;
    with --insecure none is used and the client config is removed, so caractrl does not offer TLS to it."""
    if spec.insecure:
        (data / localpki.CLIENT_CONFIG).unlink(missing_ok=True)
        return
    hosts = [split_address(a)[0] for a in (spec.api_listen, spec.agent_listen)]
    now = datetime.datetime.now(datetime.UTC)
    localpki.ensure(data, api_listen=spec.api_listen, node_name=spec.node_name, hosts=hosts, now=now)
