"""`cara up` / `cara down` / `cara status`: a whole Caravanserai cluster on this machine with one command.

`cara up` starts a supervisor in the background (`caravanserai.cli.supervisor`) that runs etcd (data under
`--data-dir`), the apiserver, the controller manager (scheduler, node health, gc), an agent for the local Docker engine
and the web dashboard (`cara-dashboard`, unless `--no-dashboard`), restarting any that dies; it returns once the API
answers and the local node is Ready, and prints the API address, the dashboard's URL and the next command to try. Before
starting anything it checks that etcd is installed and that a Docker engine answers, naming the Debian package to
install when one is missing, and that every port is free.

`cara down` stops every process of the cluster; the containers of its projects keep running (stopping an agent
never stops workloads) and the next `cara up` finds them again, with every object kept in etcd under `--data-dir`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import click

from caravanserai.cli import clusterconfig
from caravanserai.cli.clusterstart import fail, ignored_flags, next_steps, split_address, start
from caravanserai.cli.localcluster import (
    DEFAULT_ETCD_PORT,
    default_data_dir,
    default_node_name,
    exclusive,
    leftover_processes,
    probe,
    read_state,
    running_clusters,
    stop_processes,
    wait_ready,
)
from caravanserai.cli.supervisor import (
    STATE_FILE,
    ClusterSpec,
    process_alive,
)
from caravanserai.client import DEFAULT_SERVER
from caravanserai.text.addresses import DEFAULT_DOCKER_HOST, OFF, is_off

# ---------------------------------------------------------------------------------------------- small helpers


def _data_dir(option: Path | None) -> Path:
    return (option or default_data_dir()).expanduser().resolve()


def _address_or_off(ctx: click.Context, param: click.Parameter, value: str) -> str:
    return OFF if is_off(value) else _address(ctx, param, value)


def _address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        split_address(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


# ---------------------------------------------------------------------------------------------- commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Run a whole Caravanserai cluster on this machine: etcd, the API server, the controllers, an agent and the
    web dashboard."""


DATA_DIR_OPTION = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="etcd data, logs and the cluster's state file  [default: ~/.local/share/caravanserai]",
)


@cli.command()
@DATA_DIR_OPTION
@click.option(
    "--listen",
    default=DEFAULT_SERVER,
    show_default=True,
    callback=_address,
    metavar="HOST:PORT",
    help="API server address (host:port)",
)
@click.option(
    "--etcd-port",
    default=DEFAULT_ETCD_PORT,
    show_default=True,
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="etcd client port (on 127.0.0.1)",
)
@click.option(
    "--etcd-peer-port",
    default=None,
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="etcd peer port  [default: --etcd-port + 1]",
)
@click.option("--no-agent", is_flag=True, help="run no agent (a control plane without a local node; no Docker needed)")
@click.option("--node-name", default=None, metavar="NAME", help="name of the local node  [default: the host name]")
@click.option(
    "--agent-listen",
    default="127.0.0.1:7421",
    show_default=True,
    callback=_address,
    metavar="HOST:PORT",
    help="address of the agent's log service",
)
@click.option(
    "--agent-health-listen",
    default="127.0.0.1:7422",
    show_default=True,
    callback=_address,
    metavar="HOST:PORT",
    help="address of the agent's /healthz",
)
@click.option(
    "--ingress-listen",
    default="127.0.0.1:8081",
    show_default=True,
    callback=_address_or_off,
    metavar="HOST:PORT",
    help="address of the agent's ingress HTTP proxy, or off",
)
@click.option(
    "--docker-host",
    default=DEFAULT_DOCKER_HOST,
    show_default=True,
    metavar="URL",
    help="Docker Engine address the agent uses (unix:// or tcp://)",
)
@click.option(
    "--metrics-listen",
    default="127.0.0.1:7423",
    show_default=True,
    callback=_address_or_off,
    metavar="HOST:PORT",
    help="address of the API server's /metrics, /healthz and /readyz (off: none)",
)
@click.option("--no-dashboard", is_flag=True, help="run no web dashboard")
@click.option(
    "--dashboard-listen",
    default="127.0.0.1:7480",
    show_default=True,
    callback=_address,
    metavar="HOST:PORT",
    help="address of the web dashboard",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="no TLS and no credentials: etcd, the API and the agent answer every local user, Secrets are stored in the "
    "clear (without it: a CA, certificates, the admin's client config and an encryption key in the data dir)",
)
@click.option(
    "--timeout", default=90.0, show_default=True, metavar="SECONDS", help="seconds to wait for the cluster to answer"
)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="settings of the controllers and the agent (YAML: sections controllers and agent, keys their flags' names, "
    "e.g. controllers: {heartbeat-timeout: 20s, grace-period: 30s}; see docs/cara.md)",
)
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="SECTION.KEY=VALUE",
    help="one setting, after --config (repeatable), e.g. controllers.grace-period=30s, agent.labels.zone=a",
)
@click.pass_context
def up(
    ctx: click.Context,
    data_dir: Path | None,
    listen: str,
    etcd_port: int,
    etcd_peer_port: int | None,
    no_agent: bool,
    node_name: str | None,
    agent_listen: str,
    agent_health_listen: str,
    ingress_listen: str,
    docker_host: str,
    metrics_listen: str,
    no_dashboard: bool,
    dashboard_listen: str,
    insecure: bool,
    timeout: float,
    config: Path | None,
    assignments: tuple[str, ...],
) -> None:
    """Start etcd, the API server, the controllers, an agent and the dashboard in the background; return once the
    cluster answers.

    --config FILE and --set pass settings to the controllers and the agent (heartbeat timeout, grace period,
    succeeded-ttl, strategy, labels, network pool, stop timeout, reserved resources, fence-after, …); unknown keys
    are refused by name before anything starts.

    Running it again while the cluster is up changes nothing and prints the same summary."""
    data = _data_dir(data_dir)
    try:
        settings = clusterconfig.load(config, assignments)
    except ValueError as exc:
        fail(str(exc))
    asked = ClusterSpec(
        data_dir=str(data),
        api_listen=listen,
        etcd_client_port=etcd_port,
        etcd_peer_port=etcd_peer_port or etcd_port + 1,
        agent=not no_agent,
        agent_listen=agent_listen,
        node_name="" if no_agent else (node_name or default_node_name()),
        docker_host=docker_host,
        metrics_listen=metrics_listen,
        agent_health_listen=agent_health_listen,
        dashboard=not no_dashboard,
        dashboard_listen=dashboard_listen,
        ingress_listen=ingress_listen,
        controller_flags=settings.flags(clusterconfig.CONTROLLERS),
        agent_flags=settings.flags(clusterconfig.AGENT),
        insecure=insecure,
    )
    spec = _running_or_started(ctx, data, asked)
    _report_ready(spec, data, timeout)


def _running_or_started(ctx: click.Context, data: Path, asked: ClusterSpec) -> ClusterSpec:
    """Under the data directory's lock: the running cluster's settings (with a warning naming the flags it ignores),
    or `asked` once a cluster with them has been started."""
    with exclusive(data):
        state = read_state(data)
        if state is None:
            start(data, asked)
            return asked
    spec = ClusterSpec(**state["spec"])
    click.echo(f"Caravanserai is already running (supervisor pid {state['supervisor_pid']}).")
    ignored = ignored_flags(ctx, spec, asked)
    if ignored:
        click.echo(
            f"warning: {', '.join(ignored)} ignored: the running cluster keeps its settings "
            "(cara down first to change them)",
            err=True,
        )
    return spec


def _report_ready(spec: ClusterSpec, data: Path, timeout: float) -> None:
    """Wait until the cluster answers (exit 1 after `timeout`), then print the summary and the next steps."""
    problem = asyncio.run(wait_ready(spec.api_listen, spec.node_name or None, timeout, spec.admin_tls()))
    if problem:
        fail(
            f"the cluster did not become ready within {timeout:g}s: {problem} (it keeps trying; logs in "
            f"{data / 'logs'}; `cara status`, `cara down`)"
        )
    node = f", node {spec.node_name} Ready" if spec.agent else ", no agent"
    click.echo(f"Caravanserai is up: API at {spec.api_listen}{node}; data and logs in {data}.")
    for line in next_steps(spec):
        click.echo(line)


@cli.command()
@DATA_DIR_OPTION
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="seconds to wait for a clean stop before killing (the agent removes its spare networks on the way out)",
)
def down(data_dir: Path | None, timeout: float) -> None:
    """Stop every process of the local cluster; its data stays for the next `cara up`.

    The containers of its projects keep running, as when any agent stops: delete the projects first
    (`caractrl delete project NAME --wait`) to remove them."""
    data = _data_dir(data_dir)
    if not data.is_dir():  # nothing to lock; processes of a removed data directory are still found
        _stop_cluster(data, timeout)
        return
    with exclusive(data):
        _stop_cluster(data, timeout)


def _stop_cluster(data: Path, timeout: float) -> None:
    """SIGTERM the supervisor and wait for it; then stop whatever process of the cluster is left."""
    state = read_state(data)
    if state is None and not leftover_processes(data):
        (data / STATE_FILE).unlink(missing_ok=True)
        click.echo("Caravanserai is not running.")
        return
    if state is not None:
        pid = int(state["supervisor_pid"])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    survivors = stop_processes(leftover_processes(data), grace=5.0)
    (data / STATE_FILE).unlink(missing_ok=True)
    if survivors:
        fail(f"processes {' '.join(map(str, survivors))} did not stop")
    click.echo(
        "Caravanserai is down; its state is kept for the next `cara up`, and the containers of running "
        "projects keep running."
    )


@cli.command()
@DATA_DIR_OPTION
def status(data_dir: Path | None) -> None:
    """Show the local cluster's processes, whether the API answers and the local node's state.

    Without --data-dir it looks at the default data directory of the user running it; when no cluster runs there,
    it says which directory it looked at and names every cluster running on this machine (any user's) with the
    command that shows it.

    Exit status: 0 when everything runs and answers, 1 when something does not, 3 when the cluster is not running."""
    data = _data_dir(data_dir)
    state = read_state(data)
    if state is None:
        leftovers = leftover_processes(data)
        if leftovers:
            click.echo(
                f"Caravanserai is not running, but processes of it are left (pids "
                f"{' '.join(map(str, leftovers))}): run cara down."
            )
        else:
            click.echo(f"Caravanserai is not running (data dir {data}).")
        _point_at_other_clusters(data)
        sys.exit(3)
    spec = ClusterSpec(**state["spec"])
    healthy = True
    click.echo(f"{'supervisor':<19}pid {state['supervisor_pid']:<8} running  data {data}")
    for name, child in state["children"].items():
        alive = process_alive(int(child["pid"]))
        healthy &= alive
        click.echo(f"{name:<19}pid {child['pid']:<8} {'running' if alive else 'down':<8} restarts {child['restarts']}")
    api = asyncio.run(probe(spec.api_listen, None, spec.admin_tls()))
    healthy &= not api
    click.echo(f"API {spec.api_listen}: {api or 'answering'}")
    if spec.agent and not api:
        node = asyncio.run(probe(spec.api_listen, spec.node_name, spec.admin_tls()))
        healthy &= not node
        click.echo(f"node {spec.node_name}: {node or 'Ready'}")
    sys.exit(0 if healthy else 1)


def _point_at_other_clusters(data: Path) -> None:
    """Name every cluster running on this machine with another data directory (another user's default, say), with
    the command that shows it; or say how to look elsewhere."""
    others = [c for c in running_clusters() if c.data_dir and Path(c.data_dir) != data]
    for other in others:
        click.echo(
            f"A cluster runs with data dir {other.data_dir} (user {other.user}, supervisor pid {other.pid}, API at "
            f"{other.api_listen}): cara status --data-dir {other.data_dir}"
        )
    if not others:
        click.echo("No other cluster runs on this machine; give --data-dir for a cluster started with one.")


def main() -> None:
    """Entry point of the `cara` console script."""
    cli()


if __name__ == "__main__":
    main()
