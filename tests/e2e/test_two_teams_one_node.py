"""Two teams on one node (issue #27): an apiserver with authentication on (a token file), the scheduler, the quota
queue, the garbage collector (its namespace controller) and the routes controller, one agent on real Docker. Each
team has a namespace, a
ResourceQuota of two projects and a user bound to `edit` there; `authenticated-view` is switched off, so neither
team reads the other's objects.

Both teams run projects of the same names side by side (their own containers, networks and ingress hosts); a third
project of each waits in Queued and `caractrl describe` says why; team-b may neither read nor delete team-a's
projects or Secrets; deleting one of team-a's projects admits its queued one; deleting namespace team-b removes its
running and queued projects and their containers, and team-a runs on untouched; lowering team-a's quota below its
use keeps its containers running and queues what comes next."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from agent_harness import NODE_LABEL, container_ids, docker, remove_node_objects
from integration.cluster_sim import running_manager

from caravanserai import meta, v1
from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.gc.policy import GCConfig
from caravanserai.controllers.queue import app as queue_app
from caravanserai.controllers.routes import app as routes_app
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.errors import Forbidden, NotFound
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

TEAMS = {"team-a": "alice", "team-b": "bob"}
SERVE = 'echo "hello $NS" > /tmp/index.html; trap "exit 0" TERM; httpd -f -p 8080 -h /tmp & wait'
QUICK_STOP = 'trap "exit 0" TERM; sleep 3600 & wait'  # stops at once on SIGTERM (busybox sh as PID 1)
CLOCK = SystemClock()
FAST_GC = gc_app.GCOptions(config=GCConfig(terminated_delay=0.5))  # stopped projects' records go soon


def _project(name: str, namespace: str, image: str, *, serve: bool = False) -> v1.Project:
    p = project(name, image=image, command=["sh", "-c", SERVE if serve else QUICK_STOP], requests={"cpu": "50m"})
    p.metadata.namespace = namespace
    p.spec.services[0].env.add(name="NS", value=namespace)
    if serve:
        ingress = p.spec.ingress.add(name="site", host="web")
        ingress.target.service, ingress.target.port = "svc0", 8080
    return p


def _edit_binding(namespace: str, user: str) -> v1.RoleBinding:
    binding = meta.with_type_meta(v1.RoleBinding(metadata=v1.ObjectMeta(name="team", namespace=namespace)))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name="edit"))
    binding.spec.subjects.add(kind="User", name=user)
    return binding


def _quota(namespace: str) -> v1.ResourceQuota:
    quota = meta.with_type_meta(v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=namespace)))
    quota.spec.hard["projects"] = "2"
    return quota


@pytest.fixture
async def cluster(etcd: EtcdServer, image: str, tmp_path: Path) -> AsyncIterator[tuple[RunningApiServer, Agent]]:
    """The apiserver (token file), the controllers as `controller:manager` and the agent as its node; the agent's
    Docker objects are removed afterwards."""
    node = f"e2e-{uuid.uuid4().hex[:8]}"
    tokens = tmp_path / "tokens.csv"
    users = "".join(f"{user}-token,{user}\n" for user in TEAMS.values())
    tokens.write_text(f"admin-token,root,admin\ncontroller-token,controller:manager\nnode-token,node:{node}\n{users}")
    async with (
        apiserver(etcd.endpoint, token_file=str(tokens), bookmark_interval=0.2) as api,
        Client(api.address, token="controller-token", retry_timeout=10) as controllers,
    ):

        def setup(manager: Any) -> None:
            scheduler_app.setup(manager, controllers, CLOCK)
            queue_app.setup(manager, controllers, CLOCK)
            gc_app.setup(manager, controllers, CLOCK, FAST_GC)
            routes_app.setup(manager, controllers, CLOCK)  # the Routes the node's ingress reads

        config = AgentConfig(
            server=api.address,
            node_name=node,
            token="node-token",
            listen="127.0.0.1:0",
            heartbeat_interval=0.5,
            stop_timeout=1,
            throughput_bytes=64 * 1024,
        )
        agent = Agent(config)
        task = asyncio.create_task(agent.run(), name=f"agent-{node}")
        try:
            async with running_manager(controllers, setup):
                yield api, agent
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.to_thread(remove_node_objects, node)


async def _phase(client: Client, key: str) -> str:
    return (await client.projects.get(key)).status.phase


async def _all_in(client: Client, keys: list[str], phase: str) -> bool:
    return all([await _phase(client, key) == phase for key in keys])


async def _served(agent: Agent, host: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{agent.ingress_port}/index.html"
    async with aiohttp.ClientSession() as session, session.get(url, headers={"Host": host}) as response:
        return response.status, await response.text()


async def _describe(api: RunningApiServer, token: str, namespace: str, name: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "caravanserai.cli", "--server", api.address, "--token", token, "-n", namespace,
        "describe", "project", name,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_two_teams_share_one_node(cluster: tuple[RunningApiServer, Agent], image: str) -> None:
    api, agent = cluster
    node = agent.config.node_name
    async with Client(api.address, token="admin-token", retry_timeout=10) as admin:
        await wait_for(lambda: agent.synced.is_set(), timeout=20, message="the agent to sync")
        default = await admin.resource(v1.ClusterRoleBinding).get("authenticated-view")
        default.metadata.annotations["caravanserai.io/autoupdate"] = "false"
        del default.spec.subjects[:]  # teams do not read each other's objects
        await admin.resource(v1.ClusterRoleBinding).update(default)
        for namespace, user in TEAMS.items():
            await admin.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=namespace)))
            await admin.resource(v1.ResourceQuota).create(_quota(namespace))
            await admin.resource(v1.RoleBinding).create(_edit_binding(namespace, user))
            secret = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name="db", namespace=namespace)))
            secret.spec.data["password"] = namespace.encode()
            await admin.secrets.create(secret)

        alice = Client(api.address, token="alice-token", namespace="team-a", retry_timeout=10)
        bob = Client(api.address, token="bob-token", namespace="team-b", retry_timeout=10)
        async with alice, bob:
            for client, namespace in ((alice, "team-a"), (bob, "team-b")):
                await wait_for(lambda c=client: _allowed(c), timeout=10, message=f"{namespace}'s binding")
                await client.projects.create(_project("web", namespace, image, serve=True))
                await client.projects.create(_project("api", namespace, image))
                await asyncio.sleep(0.01)  # the third is the youngest
                queued = await client.projects.create(_project("batch", namespace, image))
                assert queued.status.phase == v1.QUEUED
            running = [f"{ns}/{name}" for ns in TEAMS for name in ("web", "api")]
            await wait_for(lambda: _all_in(admin, running, v1.RUNNING), timeout=30, message="four projects running")

            # Side by side on the one node, nothing shared.
            ids = container_ids(f"{NODE_LABEL}={node}")
            assert set(ids) == {f"cara_{ns}_{name}_svc0_{node}" for ns in TEAMS for name in ("web", "api")}
            networks = {name: set(_networks(name)) for name in ids}
            web_a, web_b = (networks[f"cara_{ns}_web_svc0_{node}"] for ns in TEAMS)
            assert web_a and web_b and not web_a & web_b  # each project on a network of its own
            for namespace in TEAMS:
                host = f"web.web.{namespace}.local"
                await wait_for(
                    lambda h=host, ns=namespace: _is(_served(agent, h), (200, f"hello {ns}\n")),
                    timeout=10,
                    message=f"{host} served",
                )

            # The third waits, and says why.
            why = "waiting for quota: team: 2 of 2 projects used, asks 1; 0 ahead in the queue"
            await wait_for(lambda: _says(alice, "batch", why), timeout=10, message="the queue's reason")
            described = await _describe(api, "alice-token", "team-a", "batch")
            lines = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in described.splitlines()[:5]}
            assert (lines["Phase"], lines["Reason"]) == (v1.QUEUED, "WaitingForQuota")
            assert lines["Message"] == why

            # Team-b reaches nothing of team-a's.
            attempts: list[Callable[[], Awaitable[object]]] = [
                lambda: bob.projects.get("team-a/web"),
                lambda: bob.projects.delete("team-a/web"),
                lambda: bob.secrets.get("team-a/db"),
                lambda: bob.projects.list(namespace="team-a"),
            ]
            for attempt in attempts:
                with pytest.raises(Forbidden, match="no role bound to bob"):
                    await attempt()
            assert sorted(meta.key_of(p) for p in await bob.projects.in_namespace("team-b").list()) == [
                "team-b/api",
                "team-b/batch",
                "team-b/web",
            ]

            # A freed slot admits team-a's queued project.
            await alice.projects.delete("api")
            await wait_for(lambda: _is(_phase(alice, "batch"), v1.RUNNING), timeout=30, message="batch admitted")
            used = (await admin.resource(v1.ResourceQuota).get("team-a/team")).status.used
            assert dict(used) == {"projects": "2"}

        # Deleting namespace team-b removes its running and queued projects and their containers.
        assert await _phase(admin, "team-b/batch") == v1.QUEUED
        await admin.namespaces.delete("team-b")
        await wait_for(lambda: _gone(admin, "team-b"), timeout=30, message="namespace team-b removed")
        left = container_ids(f"{NODE_LABEL}={node}")
        assert set(left) == {f"cara_team-a_web_svc0_{node}", f"cara_team-a_batch_svc0_{node}"}
        assert await _served(agent, "web.web.team-a.local") == (200, "hello team-a\n")
        assert await _all_in(admin, ["team-a/web", "team-a/batch"], v1.RUNNING)

        # A quota lowered below its use: the running work keeps running, new work queues, the status shows it.
        quota = await admin.resource(v1.ResourceQuota).get("team-a/team")
        quota.spec.hard["projects"] = "1"
        await admin.resource(v1.ResourceQuota).update(quota)
        assert (await admin.projects.create(_project("late", "team-a", image))).status.phase == v1.QUEUED
        assert dict((await admin.resource(v1.ResourceQuota).get("team-a/team")).status.used) == {"projects": "2"}
        assert container_ids(f"{NODE_LABEL}={node}") == left
        assert await _all_in(admin, ["team-a/web", "team-a/batch"], v1.RUNNING)


async def _says(client: Client, name: str, message: str) -> bool:
    condition = meta.get_condition((await client.projects.get(name)).status.conditions, v1.CONDITION_PHASE)
    return condition is not None and condition.message == message


def _networks(container: str) -> list[str]:
    return docker("inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", container).split()


async def _allowed(client: Client) -> bool:
    return (await client.can_i("create", "projects")).allowed


async def _is(value: Any, wanted: Any) -> bool:
    return bool(await value == wanted)


async def _gone(client: Client, namespace: str) -> bool:
    try:
        await client.namespaces.get(namespace)
    except NotFound:
        return True
    return False
