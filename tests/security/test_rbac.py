"""Roles and bindings against a real apiserver with bearer-token identities: a team lead granted `admin` in one
namespace hands `edit` to a group there and cannot escalate, a developer works in their namespace only, everyone
else views, `can_i` answers from the same code, and the default binding can be switched off. With a real agent on
Docker: logs and exec are served to an `edit` user of the project's namespace, refused to a `view` user, to the
same user in another namespace and to the node itself."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from e2e.agent_harness import bind, remove_node_objects, wait_phase

from caravanserai import meta, v1
from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.client import Client
from caravanserai.client.agentlogs import agent_logs
from caravanserai.errors import Forbidden, Invalid
from caravanserai.process.tls import TLSFiles
from caravanserai.testing import ensure_test_image
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for
from support.certfiles import tls_for

TOKENS = "admin-token,root,admin\nlead-token,lead\ndev-token,dev,developers\nstranger-token,stranger\n"


@pytest.fixture
async def rbac_api(etcd: EtcdServer, certs: Path, tmp_path: Path) -> AsyncIterator[RunningApiServer]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(TOKENS)
    async with apiserver(etcd.endpoint, tls=tls_for(certs, "apiserver"), token_file=str(tokens)) as running:
        yield running


def _client(api: RunningApiServer, certs: Path, token: str, namespace: str = "default") -> Client:
    # The token names the identity; the certificate only opens the mutual TLS connection.
    tls = TLSFiles(ca=str(certs / "ca.crt"), cert=str(certs / "viewer.crt"), key=str(certs / "viewer.key"))
    return Client(api.address, tls=tls, token=token, namespace=namespace, retry_timeout=1)


def _binding(name: str, namespace: str, role: str, *subjects: tuple[str, str]) -> v1.RoleBinding:
    binding = meta.with_type_meta(v1.RoleBinding(metadata=v1.ObjectMeta(name=name, namespace=namespace)))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name=role))
    for kind, who in subjects:
        binding.spec.subjects.add(kind=kind, name=who)
    return binding


async def _until(client: Client, verb: str, resource: str, *, allowed: bool, namespace: str | None = None) -> None:
    """Wait until the authorizer, which follows the bindings' watch cache, gives this answer (a binding takes effect
    within the cache's latency, as in Kubernetes)."""
    for _ in range(100):
        if (await client.can_i(verb, resource, namespace=namespace)).allowed == allowed:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"can_i {verb} {resource} stayed {not allowed}")


def _secret(name: str) -> v1.Secret:
    secret = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name=name)))
    secret.spec.data["k"] = b"v"
    return secret


async def test_a_team_lead_a_developer_and_a_stranger(rbac_api: RunningApiServer, certs: Path) -> None:
    async with _client(rbac_api, certs, "admin-token") as admin:
        for name in ("team-a", "team-b"):
            await admin.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=name)))
        await admin.resource(v1.RoleBinding).create(_binding("lead", "team-a", "admin", ("User", "lead")))
        bad = v1.Role(metadata=v1.ObjectMeta(name="bad", namespace="team-a"))
        bad.spec.rules.add(verbs=["read"], kinds=["pods"])
        with pytest.raises(Invalid) as info:
            await admin.resource(v1.Role).create(bad)
        assert {v.field for v in info.value.violations} >= {"spec.rules[0].verbs[0]"}
        bad.spec.rules[0].verbs[:] = ["get"]
        with pytest.raises(Invalid, match=r"spec\.rules\[0\]\.kinds\[0\]"):
            await admin.resource(v1.Role).create(bad)

    async with _client(rbac_api, certs, "lead-token", "team-a") as lead:
        await _until(lead, "create", "rolebindings", allowed=True)
        bindings = lead.resource(v1.RoleBinding)
        await bindings.create(_binding("devs", "team-a", "edit", ("Group", "developers"), ("User", "not-yet-hired")))
        with pytest.raises(Forbidden, match="grants what they do not hold in namespace team-a"):
            await bindings.create(_binding("root", "team-a", "cluster-admin", ("User", "lead")))
        with pytest.raises(Forbidden, match="no role bound to lead allows create rolebindings in namespace team-b"):
            await bindings.create(_binding("devs", "team-b", "edit", ("Group", "developers")))

    async with _client(rbac_api, certs, "dev-token", "team-a") as dev:
        await _until(dev, "create", "projects", allowed=True)
        await dev.projects.create(project("web"))
        await dev.secrets.create(_secret("db"))
        assert (await dev.secrets.get("db")).spec.data["k"] == b"v"
        with pytest.raises(Forbidden, match="no role bound to dev allows create projects in namespace team-b"):
            await dev.projects.in_namespace("team-b").create(project("web"))
        with pytest.raises(Forbidden):
            await dev.secrets.list(namespace="team-b")
        assert [meta.key_of(p) for p in await dev.projects.list()] == ["team-a/web"]  # everyone views (default)
        yes = await dev.can_i("create", "projects")
        assert yes.allowed and yes.reason == "allowed by rolebinding team-a/devs (clusterrole edit)"
        no = await dev.can_i("delete", "nodes")
        assert not no.allowed and no.reason == "no role bound to dev allows delete nodes"
        with pytest.raises(Forbidden, match="only an admin"):
            await dev.can_i("get", "secrets", user="lead")

    async with _client(rbac_api, certs, "stranger-token", "team-a") as stranger:
        assert len(await stranger.projects.list()) == 1
        with pytest.raises(Forbidden):
            await stranger.secrets.get("db")
        with pytest.raises(Forbidden):
            await stranger.projects.delete("web")

    async with _client(rbac_api, certs, "admin-token") as admin:
        answer = await admin.can_i("get", "secrets", namespace="team-a", user="stranger")
        assert not answer.allowed
        answer = await admin.can_i("get", "secrets", namespace="team-a", user="someone", groups=["developers"])
        assert answer.allowed
        default = await admin.resource(v1.ClusterRoleBinding).get("authenticated-view")
        default.metadata.annotations["caravanserai.io/autoupdate"] = "false"
        del default.spec.subjects[:]
        await admin.resource(v1.ClusterRoleBinding).update(default)

    async with _client(rbac_api, certs, "stranger-token", "team-a") as stranger:
        await _until(stranger, "list", "projects", namespace="", allowed=False)
        with pytest.raises(Forbidden, match="no role bound to stranger allows list projects in every namespace"):
            await stranger.projects.list()


# ---- logs, exec and port-forward on a real agent: the agent asks the apiserver about each caller's roles ----

ROOT = Path(__file__).resolve().parents[2]
AGENT_TOKENS = "admin-token,root,admin\nalice-token,alice,team-a-devs\nvic-token,vic\n"


def _docker_image() -> str:
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False).returncode != 0:
        pytest.skip("no Docker engine answers; run scripts/start-dockerd.sh")
    return ensure_test_image()


@pytest.fixture
async def node_cluster(etcd: EtcdServer, tmp_path: Path) -> AsyncIterator[tuple[RunningApiServer, Agent, Path]]:
    """An apiserver and one agent on real Docker, both authenticating with client certificates (a fresh CA with
    a node of a random name) and the same token file; everything the agent made is removed afterwards."""
    image = await asyncio.to_thread(_docker_image)
    node = f"sec-{uuid.uuid4().hex[:8]}"
    identities = ["apiserver", "admin", "viewer", f"node:{node}"]
    subprocess.run([str(ROOT / "deploy" / "certs.sh"), str(tmp_path), *identities], check=True, capture_output=True)
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(AGENT_TOKENS)
    async with apiserver(etcd.endpoint, tls=tls_for(tmp_path, "apiserver"), token_file=str(tokens)) as api:
        config = AgentConfig(
            server=api.address,
            node_name=node,
            tls=tls_for(tmp_path, f"node:{node}"),
            token_file=str(tokens),
            listen="127.0.0.1:0",
            heartbeat_interval=0.5,
            stop_timeout=1,
            throughput_bytes=64 * 1024,
        )
        agent = Agent(config)
        task = asyncio.create_task(agent.run())
        try:
            async with _client(api, tmp_path, "admin-token") as admin:

                async def ready() -> bool:
                    if task.done():
                        task.result()
                    return (await admin.nodes.get(node)).status.state == v1.NODE_READY and agent.synced.is_set()

                await wait_for(ready, timeout=20, message="the agent to register")
                for namespace in ("team-a", "team-b"):
                    await admin.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=namespace)))
                    say = ["sh", "-c", f"echo hello from {namespace}; exec sleep 3600"]
                    await admin.projects.create(project("web", image=image, command=say, namespace=namespace))
                    await bind(admin, f"{namespace}/web", node)
                for namespace in ("team-a", "team-b"):
                    await wait_phase(admin, f"{namespace}/web", v1.RUNNING)
            yield api, agent, tmp_path
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.to_thread(remove_node_objects, node)


async def _logs(node: v1.Node, certs: Path, token: str, namespace: str) -> list[str]:
    tls = TLSFiles(ca=str(certs / "ca.crt"), cert=str(certs / "viewer.crt"), key=str(certs / "viewer.key"))
    request = v1.LogsRequest(project="web", namespace=namespace, tail=-1)
    stream = agent_logs(node, request, credentials=tls.channel_credentials(), token=token)
    return [line.data.decode() async for line in stream]


async def _exec(port: int, files: TLSFiles, token: str, namespace: str) -> list[api_pb2.ExecResponse]:
    start = api_pb2.ExecStart(project="web", namespace=namespace, service="svc0", command=["echo", "ok"])
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", files.channel_credentials()) as channel:
        call = api_pb2_grpc.AgentStub(channel).Exec(iter([api_pb2.ExecRequest(start=start)]), metadata=metadata)
        return [r async for r in call]


async def _forward(port: int, files: TLSFiles, token: str) -> grpc.aio.AioRpcError:
    """How a port-forward to port 9 of team-a's web (where nothing listens) ends."""
    first = api_pb2.PortForwardRequest(project="web", namespace="team-a", service="svc0", port=9)
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", files.channel_credentials()) as channel:
        call = api_pb2_grpc.AgentStub(channel).PortForward(
            iter([first]), metadata=(("authorization", f"Bearer {token}"),)
        )
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async for _ in call:
                pass
    return ended.value


async def _caractrl_logs(api: RunningApiServer, certs: Path, node: str) -> None:
    """`caractrl -n NS logs web` as alice: her namespace's lines; the other namespace refused in one line."""

    async def logs(namespace: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "caravanserai.cli", "--server", api.address, "--token", "alice-token",
            "--tls-ca", str(certs / "ca.crt"), "--tls-cert", str(certs / "viewer.crt"),
            "--tls-key", str(certs / "viewer.key"), "-n", namespace, "logs", "web",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    assert await logs("team-a") == (0, "hello from team-a\n", "")
    assert await logs("team-b") == (
        1,
        "",
        f"error: the agent of node/{node} refused: alice may not read logs of project team-b/web: no role bound to "
        "alice allows get projects/log in namespace team-b\n",
    )


@pytest.mark.docker
async def test_logs_and_exec_follow_the_roles_of_the_project_namespace(
    node_cluster: tuple[RunningApiServer, Agent, Path],
) -> None:
    api, agent, certs = node_cluster
    node_name = agent.config.node_name
    async with _client(api, certs, "admin-token") as admin:
        await admin.resource(v1.RoleBinding).create(_binding("devs", "team-a", "edit", ("Group", "team-a-devs")))
        await admin.resource(v1.RoleBinding).create(_binding("viewers", "team-a", "view", ("User", "vic")))
        node = await admin.nodes.get(node_name)
        lines = await wait_for(lambda: _logs(node, certs, "admin-token", "team-a"), timeout=10, message="team-a's line")
        assert lines == ["hello from team-a"]

    async with _client(api, certs, "alice-token", "team-a") as alice:
        await _until(alice, "get", "projects/log", allowed=True)
        assert (
            await alice.can_i("create", "projects/exec")
        ).reason == "allowed by rolebinding team-a/devs (clusterrole edit)"
        with pytest.raises(Forbidden, match="only an admin"):
            await alice.can_i("get", "projects/log", user="vic")
        mine = await alice.can_i("delete", "nodes", user="alice", groups=["admin"])
        assert not mine.allowed  # about herself, the groups asked for are not hers: her own count
        with pytest.raises(Invalid, match="'projects/logs' is not a subresource"):
            await alice.call(alice.stub.Authorize, v1.AccessRequest(verb="get", resource="projects/logs"), retry=False)
    assert await _logs(node, certs, "alice-token", "team-a") == ["hello from team-a"]  # an edit user of team-a
    with pytest.raises(Forbidden) as refused:  # not of team-b
        await _logs(node, certs, "alice-token", "team-b")
    assert refused.value.message == (
        "alice may not read logs of project team-b/web: no role bound to alice allows get projects/log in namespace "
        "team-b"
    )
    with pytest.raises(Forbidden, match="vic may not read logs of project team-a/web: no role bound to vic"):
        await _logs(node, certs, "vic-token", "team-a")  # view reads the project, never its logs

    viewer_tls = tls_for(certs, "viewer")
    port = agent.port
    done = await _exec(port, viewer_tls, "alice-token", "team-a")
    assert [r.stdout for r in done if r.HasField("stdout")] == [b"ok\n"]
    for token, namespace, who in (("alice-token", "team-b", "alice"), ("vic-token", "team-a", "vic")):
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await _exec(port, viewer_tls, token, namespace)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert f"{who} may not exec into project {namespace}/web" in (denied.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as denied:  # the node itself, with its own certificate
        await _exec(port, tls_for(certs, f"node:{node_name}"), "", "team-a")
    assert denied.value.details() == f"node:{node_name} may not exec into project team-a/web: nodes never may"
    allowed_through = await _forward(port, viewer_tls, "alice-token")  # past the check, to a closed port
    assert allowed_through.code() == grpc.StatusCode.FAILED_PRECONDITION
    refused_forward = await _forward(port, viewer_tls, "vic-token")
    assert refused_forward.code() == grpc.StatusCode.PERMISSION_DENIED
    assert refused_forward.details() == (
        "vic may not port-forward to project team-a/web: no role bound to vic allows create projects/portforward in "
        "namespace team-a"
    )
    await _caractrl_logs(api, certs, node_name)

    # The node may ask the apiserver about others (its agent does so); the answer is the user's own.
    async with Client(api.address, tls=tls_for(certs, f"node:{node_name}"), retry_timeout=1) as as_node:
        yes = await as_node.can_i(
            "get", "projects/log", namespace="team-a", name="web", user="x", groups=["team-a-devs"]
        )
        assert yes.allowed
        mine = await as_node.can_i("get", "projects/log", namespace="team-a", name="web")
        assert not mine.allowed and mine.reason == "nodes and controllers are never allowed projects/log"

    async with _client(api, certs, "admin-token") as admin:
        logs_of_web = v1.Role(metadata=v1.ObjectMeta(name="web-logs", namespace="team-b"))
        logs_of_web.spec.rules.add(verbs=["get"], kinds=["projects/log"], names=["web"])
        await admin.resource(v1.Role).create(logs_of_web)
        typo = meta.copy(logs_of_web)
        typo.metadata.name = "typo"
        typo.spec.rules[0].kinds[:] = ["projects/logz"]
        with pytest.raises(Invalid, match=r'spec\.rules\[0\]\.kinds\[0\]: "projects/logz" is not a kind'):
            await admin.resource(v1.Role).create(typo)
