"""`cara up` / `cara status` / `cara down` as a user runs them: real processes, real etcd, real Docker.

Each test gets its own data directory, free loopback ports and a unique node and project name, so it never meets
the default cluster (`make demo`) or another test. The commands are the installed console scripts (`cara`,
`caractrl`) run as subprocesses; every assertion is about resulting state: process tables, the state file, the
API's answers, Docker's containers and the published port.

What `cara down` does to workloads is part of the contract: it stops every process of the cluster (etcd, the API
server, the controllers, the agent and the supervisor) but not the containers, as any agent stopping leaves its
containers running; the next `cara up` finds the same project Running on the same container.
"""

from __future__ import annotations

import asyncio
import base64
import getpass
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import StringIO
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from agent_harness import docker, remove_node_objects
from ruamel.yaml import YAML

from caravanserai.agent.workload.netpool import default_pool_size
from caravanserai.agent.workload.subnets import DEFAULT_RANGE
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.process.tls import TLSFiles
from caravanserai.storage.etcd import EtcdClient
from caravanserai.testing import ensure_test_image, free_port, free_ports
from caravanserai.testing.etcd import endpoint_healthy
from support import http

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello.yaml"
PROJECT_LABEL = "caravanserai.io/project"
T = TypeVar("T")


# ------------------------------------------------------------------------------------------------ helpers


def script(name: str) -> str:
    """The installed console script `name` beside this Python (skips when the package is not installed)."""
    path = BIN / name
    if not path.is_file():
        pytest.skip(f"console script {name} is not installed beside {sys.executable}")
    return str(path)


def run(argv: list[str], env: dict[str, str], timeout: float = 150) -> subprocess.CompletedProcess[str]:
    """Run a command to completion and return its result (stdout, stderr as text)."""
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must have succeeded."""
    assert result.returncode == 0, f"{result.args} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def eventually(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """Call `check` until it returns something other than None/False; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.3)


def alive(pid: int) -> bool:
    """Whether `pid` runs (zombies count as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line or environment contains `text`."""
    needle = text.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes() or needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if alive(pid)]


def http_get(url: str) -> str | None:
    """The body of `url`'s 200 answer, or None when nothing answers yet or the answer is another status."""
    try:
        return http.get_ok(url, timeout=3).decode()
    except OSError:
        return None


def table_row(output: str, name: str) -> list[str]:
    """The columns of the row of `name` in a caractrl table."""
    for line in output.splitlines()[1:]:
        columns = line.split()
        if columns and columns[0] == name:
            return columns
    raise AssertionError(f"no row {name!r} in:\n{output}")


def hello_manifest(name: str, host_port: int) -> str:
    """examples/hello.yaml with another project name and host port (so that nothing else can hold them)."""
    yaml = YAML()
    doc: Any = yaml.load(HELLO.read_text())
    doc["metadata"]["name"] = name
    doc["spec"]["services"][0]["ports"][0]["hostPort"] = host_port
    out = StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


@dataclass
class Cluster:
    """One `cara` cluster of a test: its flags, environment and the commands to drive it."""

    data_dir: Path
    api: str
    etcd_port: int
    etcd_peer_port: int
    agent_listen: str
    ingress_listen: str
    node: str
    env: dict[str, str]
    metrics_listen: str = ""
    agent_health_listen: str = ""
    dashboard_listen: str = ""

    def up_args(self, *extra: str) -> list[str]:
        return [
            script("cara"),
            "up",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            self.api,
            "--etcd-port",
            str(self.etcd_port),
            "--etcd-peer-port",
            str(self.etcd_peer_port),
            "--node-name",
            self.node,
            "--agent-listen",
            self.agent_listen,
            "--metrics-listen",
            self.metrics_listen,
            "--agent-health-listen",
            self.agent_health_listen,
            "--dashboard-listen",
            self.dashboard_listen,
            "--ingress-listen",
            self.ingress_listen,
            *extra,
        ]

    def cara(self, command: str, *extra: str) -> subprocess.CompletedProcess[str]:
        if command == "up":
            return run(self.up_args(*extra), self.env)
        return run([script("cara"), command, "--data-dir", str(self.data_dir), *extra], self.env)

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run([script("caractrl"), "--server", self.api, *args], self.env)

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads((self.data_dir / "cara.json").read_text())
        return state

    def pids(self) -> set[int]:
        """Every pid of the cluster: the supervisor and children of the state file, and any process naming
        the data directory."""
        pids = set(processes_mentioning(str(self.data_dir)))
        try:
            state = self.state()
        except (OSError, ValueError):
            return pids
        pids.add(int(state["supervisor_pid"]))
        pids.update(int(child["pid"]) for child in state["children"].values())
        return pids

    def assert_no_process_left(self) -> None:
        left = processes_mentioning(str(self.data_dir))
        assert left == [], f"processes of the cluster left behind: {left}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Flags for a private cluster. After the test `cara down` runs, any leftover process is killed and every
    Docker object of the test's node is removed."""
    data_dir = tmp_path / "data"
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "share"),
    }
    env.pop("CARA_SERVER", None)
    api, etcd, peer, agent, metrics, health, dash, ingress = free_ports(8)
    c = Cluster(
        data_dir=data_dir,
        api=f"127.0.0.1:{api}",
        etcd_port=etcd,
        etcd_peer_port=peer,
        agent_listen=f"127.0.0.1:{agent}",
        ingress_listen=f"127.0.0.1:{ingress}",
        node=f"cara-up-{uuid.uuid4().hex[:8]}",
        env=env,
        metrics_listen=f"127.0.0.1:{metrics}",
        agent_health_listen=f"127.0.0.1:{health}",
        dashboard_listen=f"127.0.0.1:{dash}",
    )
    try:
        yield c
    finally:
        if (data_dir / "cara.json").exists() or processes_mentioning(str(data_dir)):
            run([script("cara"), "down", "--data-dir", str(data_dir), "--timeout", "20"], env, timeout=60)
        for pid in processes_mentioning(str(data_dir)):
            os.kill(pid, signal.SIGKILL)
        if shutil.which("docker"):
            remove_node_objects(c.node)  # after the agent stopped, so that nothing recreates them


# ------------------------------------------------------------------------------------------------ the round trip


@pytest.mark.docker
@pytest.mark.timeout(420)
def test_up_runs_a_project_survives_a_killed_child_and_down_up(cluster: Cluster, docker_engine: None) -> None:
    ensure_test_image()
    name = f"hello-{uuid.uuid4().hex[:6]}"
    host_port = free_port()
    manifest = cluster.data_dir.parent / "hello.yaml"
    manifest.write_text(hello_manifest(name, host_port))
    # cara up: the address and the next command, then the cluster answers with the local node Ready.
    out = ok(cluster.cara("up"))
    assert f"Caravanserai is up: API at {cluster.api}, node {cluster.node} Ready" in out
    assert f"Next: caractrl --server {cluster.api} get nodes" in out
    nodes = ok(cluster.ctl("get", "nodes"))
    assert table_row(nodes, cluster.node)[1] == "Ready"
    # The next steps name the dashboard, which shows the node; the apiserver and the agent answer /healthz.
    dashboard = f"http://{cluster.dashboard_listen}/"
    token = (cluster.data_dir / "dashboard-token").read_text().strip()
    assert (cluster.data_dir / "dashboard-token").stat().st_mode & 0o777 == 0o600
    assert f"open {dashboard}?token={token} (the live dashboard)" in out
    assert http_get(dashboard + "api/v1/cluster") is None  # 401 without the token
    shown = eventually(lambda: dashboard_nodes(dashboard, token), 30, "the dashboard to show the node")
    assert shown == [cluster.node]
    assert http_get(f"http://{cluster.metrics_listen}/healthz") == "ok\n"
    assert http_get(f"http://{cluster.agent_health_listen}/healthz").startswith("ok")

    # A second cara up changes nothing.
    again = ok(cluster.cara("up"))
    assert "already running" in again and f"API at {cluster.api}" in again

    # The example runs on real Docker and answers on its published port; its logs come through the agent.
    assert f"project/{name} created" in ok(cluster.ctl("apply", "-f", str(manifest)))
    ok(cluster.ctl("wait", "project", name, "--for", "phase=Running", "--timeout", "120s"))
    assert table_row(ok(cluster.ctl("get", "projects")), name)[1:4] == ["Running", cluster.node, "1/1"]
    url = f"http://127.0.0.1:{host_port}/"
    assert eventually(lambda: http_get(url), 20, f"{url} to answer") == "hello from caravanserai\n"
    logs = eventually(lambda: logs_with(cluster, name, "response:200"), 20, "the request in the project's logs")
    assert "serving on :8080" in logs
    # The agent's log, exec and port-forward service answers only with the cluster's certificates.
    assert agent_refuses_without_a_certificate(cluster.agent_listen, cluster.data_dir / "pki" / "ca.crt", name)
    container, uid = project_container(cluster, name)
    assert docker("inspect", "--format", "{{.State.Running}} {{.Id}}", container).split() == ["true", container]

    # cara status: every component running, the API answering, the node Ready.
    status = cluster.cara("status")
    assert status.returncode == 0, status.stdout
    assert_status_running(status.stdout, cluster)

    # SIGKILL the API server: the supervisor starts a new one and the API answers again.
    killed = int(cluster.state()["children"]["apiserver"]["pid"])
    os.kill(killed, signal.SIGKILL)
    restarted = eventually(lambda: restarted_child(cluster, "apiserver", killed), 30, "the apiserver's restart")
    assert restarted["restarts"] >= 1 and alive(int(restarted["pid"]))
    eventually(lambda: cluster.cara("status").returncode == 0, 30, "cara status to report all running")
    assert table_row(ok(cluster.ctl("get", "projects")), name)[1] == "Running"

    # cara down: no process of the cluster is left; the project's container keeps running and serving.
    pids = cluster.pids()
    assert len(pids) >= 6  # supervisor, etcd, apiserver, controller manager, agent, dashboard
    down = ok(cluster.cara("down"))
    assert "Caravanserai is down" in down
    assert [pid for pid in pids if alive(pid)] == []
    cluster.assert_no_process_left()
    assert not (cluster.data_dir / "cara.json").exists()
    assert cluster.cara("status").returncode == 3
    assert docker("inspect", "--format", "{{.State.Running}}", container) == "true"
    assert http_get(url) == "hello from caravanserai\n"

    # cara up again: the same project (same uid, from etcd under --data-dir), Running on the same container
    # (adopted, not recreated).
    ok(cluster.cara("up"))
    ok(cluster.ctl("wait", "project", name, "--for", "phase=Running", "--timeout", "60s"))
    assert table_row(ok(cluster.ctl("get", "projects")), name)[1] == "Running"
    assert project_container(cluster, name) == (container, uid)

    # Deleting the project removes its container; the final cara down leaves nothing.
    ok(cluster.ctl("delete", "project", name, "--wait", "--timeout", "60s"))
    assert docker("ps", "-a", "--filter", f"label={PROJECT_LABEL}={name}", "--format", "{{.ID}}") == ""
    assert docker("network", "ls", "--filter", f"label={PROJECT_LABEL}={name}", "--format", "{{.ID}}") == ""
    ok(cluster.cara("down"))
    cluster.assert_no_process_left()


def agent_refuses_without_a_certificate(address: str, ca: Path, project: str) -> bool:
    """Whether the agent at `address` refuses a Logs call in plain text and over TLS without a client certificate."""

    async def refused(credentials: grpc.ChannelCredentials | None) -> bool:
        channel = grpc.aio.secure_channel(address, credentials) if credentials else grpc.aio.insecure_channel(address)
        async with channel:
            try:
                async for _ in api_pb2_grpc.AgentStub(channel).Logs(api_pb2.LogsRequest(project=project), timeout=10):
                    pass
            except grpc.aio.AioRpcError:
                return True
        return False

    with_ca = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
    return asyncio.run(refused(None)) and asyncio.run(refused(with_ca))


def dashboard_nodes(url: str, token: str) -> list[str] | None:
    """The node names the dashboard's cluster page shows, once it shows any."""
    try:
        names = [n["name"] for n in json.loads(http_get(url + f"api/v1/cluster?token={token}"))["nodes"]]
    except (OSError, ValueError, KeyError):
        return None
    return names or None


def logs_with(cluster: Cluster, name: str, text: str) -> str | None:
    """`caractrl logs NAME` (served by the node's agent) once it contains `text`."""
    logs = ok(cluster.ctl("logs", name))
    return logs if text in logs else None


def project_container(cluster: Cluster, name: str) -> tuple[str, str]:
    """The full container id the project's status reports for its only service, and the project's uid."""
    project = json.loads(ok(cluster.ctl("get", "project", name, "-o", "json")))
    container: str = project["status"]["services"][0]["containerId"]
    uid: str = project["metadata"]["uid"]
    assert container and uid
    return container, uid


def restarted_child(cluster: Cluster, child: str, old_pid: int) -> dict[str, Any] | None:
    """The state file's entry of `child` once it runs under a pid other than `old_pid`."""
    try:
        entry: dict[str, Any] = cluster.state()["children"][child]
    except (OSError, ValueError, KeyError):
        return None
    return entry if int(entry["pid"]) != old_pid and alive(int(entry["pid"])) else None


def assert_status_running(output: str, cluster: Cluster) -> None:
    """`cara status` lists every component running, the API answering and the node Ready."""
    lines = {line.split()[0]: line for line in output.splitlines() if line.strip()}
    for component in ("supervisor", "etcd", "apiserver", "controller-manager", "agent", "dashboard"):
        assert "running" in lines[component].split(), output
    assert f"API {cluster.api}: answering" in output
    assert f"node {cluster.node}: Ready" in output


# ------------------------------------------------------------------------------------------------ error paths


def only_etcd_path(tmp_path: Path) -> str:
    """A PATH directory holding nothing but etcd (no docker, no dockerd)."""
    etcd = shutil.which("etcd")
    if etcd is None:
        pytest.skip("etcd is not installed")
    bin_dir = tmp_path / "only-etcd"
    bin_dir.mkdir()
    (bin_dir / "etcd").symlink_to(etcd)
    return str(bin_dir)


def test_up_without_etcd_names_the_debian_package(cluster: Cluster, tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    result = run(cluster.up_args(), {**cluster.env, "PATH": str(empty)})
    assert result.returncode == 1
    assert result.stderr == (
        "error: etcd is not installed: install the Debian package etcd-server (apt-get install etcd-server)\n"
    )
    assert not (cluster.data_dir / "cara.json").exists()
    cluster.assert_no_process_left()


def test_up_without_docker_names_the_debian_package(cluster: Cluster, tmp_path: Path) -> None:
    env = {**cluster.env, "PATH": only_etcd_path(tmp_path)}
    result = run(cluster.up_args("--docker-host", f"unix://{tmp_path}/no-docker.sock"), env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "Docker is not installed: install the Debian package docker.io" in result.stderr
    cluster.assert_no_process_left()


def test_up_when_the_docker_engine_does_not_answer(cluster: Cluster, tmp_path: Path) -> None:
    if shutil.which("docker") is None and shutil.which("dockerd") is None:
        pytest.skip("Docker is not installed")
    socket_url = f"unix://{tmp_path}/no-docker.sock"
    result = run(cluster.up_args("--docker-host", socket_url), cluster.env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: no Docker engine answers at {socket_url}")
    assert "cara up --no-agent" in result.stderr
    cluster.assert_no_process_left()


def test_up_refuses_a_port_in_use(cluster: Cluster) -> None:
    host, port = cluster.api.rsplit(":", 1)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((host, int(port)))
        holder.listen()
        result = run(cluster.up_args(), cluster.env)
    assert result.returncode == 1
    assert f"error: cannot listen on {cluster.api} (--listen)" in result.stderr
    cluster.assert_no_process_left()


@pytest.mark.timeout(180)
def test_up_no_agent_runs_the_control_plane_without_docker(cluster: Cluster, tmp_path: Path) -> None:
    env = {**cluster.env, "PATH": only_etcd_path(tmp_path)}
    argv = cluster.up_args("--no-agent", "--no-dashboard", "--docker-host", f"unix://{tmp_path}/no-docker.sock")
    out = ok(run(argv, env))
    assert f"Caravanserai is up: API at {cluster.api}, no agent" in out
    assert "No agent runs here" in out
    assert "dashboard" not in out
    assert sorted(cluster.state()["children"]) == ["apiserver", "controller-manager", "etcd"]

    status = cluster.cara("status")
    assert status.returncode == 0, status.stdout
    assert "agent" not in status.stdout.split() and f"API {cluster.api}: answering" in status.stdout
    # Without --data-dir, status looks at the default data dir (here another one): it says so and points at this one.
    elsewhere = run([script("cara"), "status"], env)
    assert elsewhere.returncode == 3
    default = Path(env["XDG_DATA_HOME"]) / "caravanserai"
    assert elsewhere.stdout.startswith(f"Caravanserai is not running (data dir {default}).\n")
    pid = cluster.state()["supervisor_pid"]
    assert (
        f"A cluster runs with data dir {cluster.data_dir} (user {getpass.getuser()}, supervisor pid {pid}, API at "
        f"{cluster.api}): cara status --data-dir {cluster.data_dir}\n"
    ) in elsewhere.stdout
    nodes = cluster.ctl("get", "nodes")
    assert nodes.returncode == 0 and "No resources found." in nodes.stderr

    # Without a node a project is accepted and waits, Pending.
    manifest = tmp_path / "hello.yaml"
    manifest.write_text(hello_manifest("waiting", free_port()))
    ok(cluster.ctl("apply", "-f", str(manifest)))
    assert table_row(ok(cluster.ctl("get", "projects")), "waiting")[1] == "Pending"

    pids = cluster.pids()
    ok(cluster.cara("down"))
    assert [pid for pid in pids if alive(pid)] == []
    cluster.assert_no_process_left()


@pytest.mark.docker
@pytest.mark.timeout(240)
def test_down_leaves_no_network_of_the_cluster(cluster: Cluster, docker_engine: None) -> None:
    ensure_test_image()
    node_label = f"caravanserai.io/node={cluster.node}"

    def networks() -> list[str]:
        listed = docker("network", "ls", "--filter", f"label={node_label}", "--format", "{{.Name}}")
        return sorted(listed.split())

    ok(cluster.cara("up", "--no-dashboard"))
    full = default_pool_size(int(docker("info", "--format", "{{.NCPU}}")))  # the agent's default for this engine
    # the pool is filled in the background; a full one takes dockerd longest to remove on the way down
    spares = eventually(lambda: len(networks()) >= full and networks(), 60, f"the agent's {full} spare networks")
    assert all(name.startswith("cara_pool.") for name in spares)
    subnets = docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", *spares).split()
    assert all(IPv4Network(s).subnet_of(IPv4Network(DEFAULT_RANGE)) for s in subnets)  # the agent's own range

    ok(cluster.cara("down"))
    cluster.assert_no_process_left()
    assert networks() == []


def test_up_refuses_an_unknown_setting_by_name_before_starting_anything(cluster: Cluster, tmp_path: Path) -> None:
    config = tmp_path / "cara.yaml"
    config.write_text("controllers:\n  grace-period: 30s\n  heartbeat-timout: 20s\n")
    result = run(cluster.up_args("--config", str(config)), cluster.env)
    assert result.returncode == 1
    assert result.stderr == (
        f'error: {config}: controllers.heartbeat-timout: unknown key (did you mean "heartbeat-timeout"?)\n'
    )
    assert not (cluster.data_dir / "cara.json").exists()
    cluster.assert_no_process_left()


@pytest.mark.docker
@pytest.mark.timeout(240)
def test_up_passes_the_config_file_and_set_to_the_controllers_and_the_agent(
    cluster: Cluster, docker_engine: None, tmp_path: Path
) -> None:
    config = tmp_path / "cara.yaml"
    config.write_text(
        "controllers:\n  heartbeat-timeout: 15s\n  grace-period: 20s\n  succeeded-ttl: 1h\n"
        "agent:\n  labels: {zone: edge}\n  network-pool: 1\n  stop-timeout: 3s\n  reserved-memory: 256Mi\n"
    )
    out = ok(cluster.cara("up", "--no-dashboard", "--config", str(config), "--set", "agent.labels.tier=front"))
    assert f"node {cluster.node} Ready" in out
    children = cluster.state()["children"]
    manager = children["controller-manager"]["argv"]
    for flag, value in (("--heartbeat-timeout", "15s"), ("--grace-period", "20s"), ("--succeeded-ttl", "3600s")):
        assert manager[manager.index(flag) + 1] == value
    agent = children["agent"]["argv"]
    assert agent[agent.index("--fence-after") + 1] == "35s"  # follows the controllers' timeout + grace
    assert agent[agent.index("--heartbeat-interval") + 1] == "5"  # three beats per heartbeat timeout
    node = json.loads(ok(cluster.ctl("get", "node", cluster.node, "-o", "json")))
    assert node["metadata"]["labels"]["zone"] == "edge" and node["metadata"]["labels"]["tier"] == "front"
    allocatable = node["status"]["allocatable"]["memory"]
    capacity = node["status"]["capacity"]["memory"]
    assert allocatable != capacity  # reserved-memory reached the agent
    again = cluster.cara("up", "--no-dashboard", "--set", "controllers.grace-period=1m")
    assert again.returncode == 0 and "--set ignored: the running cluster keeps its settings" in again.stderr
    ok(cluster.cara("down"))
    cluster.assert_no_process_left()


# ------------------------------------------------------------------------------------------------ credentials

SECRET_VALUE = "plain-text-that-must-not-reach-etcd"


def secret_manifest(path: Path) -> Path:
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    path.write_text(
        f"apiVersion: caravanserai/v1\nkind: Secret\nmetadata: {{name: creds}}\nspec: {{data: {{token: {encoded}}}}}\n"
    )
    return path


def etcd_answers(port: int, pki: Path | None, identity: str = "", ca: str = "etcd-ca.crt") -> bool:
    """Whether etcd's /health answers on `port`: over TLS with `identity`'s certificate from `pki` (none: no client
    certificate), or plain HTTP when `pki` is None."""
    context = None
    if pki is not None:
        context = ssl.create_default_context(cafile=str(pki / ca))
        if identity:
            context.load_cert_chain(str(pki / f"{identity}.crt"), str(pki / f"{identity}.key"))
    return asyncio.run(endpoint_healthy("127.0.0.1", port, context))


def etcd_values(port: int, pki: Path) -> dict[bytes, bytes]:
    """Every key and value in etcd, read with the API server's etcd-client certificate."""
    tls = TLSFiles(
        cert=str(pki / "apiserver-etcd-client.crt"),
        key=str(pki / "apiserver-etcd-client.key"),
        ca=str(pki / "etcd-ca.crt"),
    )

    async def read() -> dict[bytes, bytes]:
        async with EtcdClient([f"https://127.0.0.1:{port}"], tls=tls, dial_timeout=10) as client:
            result = await client.range(b"\0", b"\0")
            return {kv.key: kv.value for kv in result.kvs}

    return asyncio.run(read())


@pytest.mark.timeout(180)
def test_up_requires_credentials_and_caractrl_finds_the_admins(cluster: Cluster, tmp_path: Path) -> None:
    out = ok(cluster.cara("up", "--no-agent", "--no-dashboard"))
    assert f"Admin: {cluster.data_dir / 'client.yaml'} (caractrl finds it;" in out
    pki = cluster.data_dir / "pki"
    # The CA, certificates, keys, encryption key and client config are the user's alone.
    assert stat.S_IMODE(pki.stat().st_mode) == 0o700
    files = [*pki.iterdir(), cluster.data_dir / "client.yaml"]
    assert {"ca.crt", "admin.key", "encryption.keys", "client.yaml"} <= {f.name for f in files}
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in files} == {f.name: 0o600 for f in files}

    # caractrl finds the admin's credentials by default; the same command without them is refused.
    nodes = cluster.ctl("get", "nodes")
    assert nodes.returncode == 0 and "No resources found." in nodes.stderr, nodes.stderr
    empty = tmp_path / "nobody.yaml"
    empty.write_text(f"server: {cluster.api}\n")
    refused = run([script("caractrl"), "--config", str(empty), "get", "nodes"], cluster.env)
    assert refused.returncode == 1 and "cannot reach the Caravanserai API server" in refused.stderr
    no_cert = run(
        [script("caractrl"), "--config", str(empty), "--tls-ca", str(pki / "ca.crt"), "get", "nodes"], cluster.env
    )
    assert no_cert.returncode == 1 and "the server wants a client certificate" in no_cert.stderr, no_cert.stderr
    config = run([script("caractrl"), "--config", str(cluster.data_dir / "client.yaml"), "get", "nodes"], cluster.env)
    assert config.returncode == 0, config.stderr

    # etcd admits only the API server's etcd-client certificate: not plain HTTP, not a certificate of the cluster CA.
    assert etcd_answers(cluster.etcd_port, pki, "apiserver-etcd-client")
    assert not etcd_answers(cluster.etcd_port, None)
    assert not etcd_answers(cluster.etcd_port, pki)
    assert not etcd_answers(cluster.etcd_port, pki, "admin")

    # Secrets are encrypted in etcd: neither etcd's values nor its files hold the plain text.
    ok(cluster.ctl("apply", "-f", str(secret_manifest(tmp_path / "secret.yaml"))))
    values = etcd_values(cluster.etcd_port, pki)
    stored = [v for k, v in values.items() if k.endswith(b"/secrets/default/creds")]
    assert len(stored) == 1 and stored[0].startswith(b"cara:enc:aesgcm:v1:")
    assert not any(SECRET_VALUE.encode() in v for v in values.values())
    assert not any(
        SECRET_VALUE.encode() in f.read_bytes() for f in (cluster.data_dir / "etcd").rglob("*") if f.is_file()
    )
    assert cluster.cara("status").returncode == 0
    ok(cluster.cara("down"))
    cluster.assert_no_process_left()


@pytest.mark.timeout(180)
def test_up_insecure_behaves_as_before(cluster: Cluster, tmp_path: Path) -> None:
    assert "Admin:" not in ok(cluster.cara("up", "--no-agent", "--no-dashboard", "--insecure"))
    assert not (cluster.data_dir / "client.yaml").exists() and not (cluster.data_dir / "pki").exists()
    nobody = tmp_path / "nobody.yaml"
    nobody.write_text(f"server: {cluster.api}\n")
    plain = run([script("caractrl"), "--config", str(nobody), "get", "nodes"], cluster.env)
    assert plain.returncode == 0 and "No resources found." in plain.stderr, plain.stderr
    assert etcd_answers(cluster.etcd_port, None)  # plain HTTP, no certificate, as before
    ok(cluster.ctl("apply", "-f", str(secret_manifest(tmp_path / "secret.yaml"))))
    assert cluster.cara("status").returncode == 0
    ok(cluster.cara("down"))
    cluster.assert_no_process_left()
