"""caractrl against a real apiserver over a real etcd.

Most commands run through click's CliRunner in a worker thread (CliRunner is synchronous; the apiserver runs on
the test's event loop). `get --watch` and the console script itself run as subprocesses. Every invocation is
checked for the absence of a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import meta, v1
from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.cli.apply import LAST_APPLIED
from caravanserai.cli.schema import proto_docs
from caravanserai.client import Client
from caravanserai.clock import timestamp
from caravanserai.errors import NotFound
from caravanserai.process.tls import TLSFiles
from caravanserai.testing import builders, free_port
from caravanserai.testing.apiserver import RunningApiServer, start_apiserver
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

CARACTRL = str(Path(sysconfig.get_path("scripts")) / "caractrl")
WEB = """\
apiVersion: caravanserai/v1
kind: Project
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  services:
  - name: web
    image: nginx:1.27
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


async def bind(client: Client, project: str, node: str) -> v1.Project:
    """Make `project` Scheduled on `node`, as the scheduler would."""
    obj = await client.projects.get(project)
    obj.status.phase = v1.SCHEDULED
    obj.status.node_ref = node
    meta.set_condition(obj.status.conditions, v1.CONDITION_SCHEDULED, v1.TRUE, reason="Scheduled", now=time.time())
    return await client.projects.update_status(obj)


async def ready_node(
    client: Client, name: str, *, agent_port: int = 0, labels: dict[str, str] | None = None
) -> v1.Node:
    node = await client.nodes.create(builders.node(name, labels=labels))
    builders.node_status(node, cpu="4", memory="8Gi")
    node.status.network.addresses.add(type="InternalIP", address="127.0.0.1")
    node.status.network.agent_port = agent_port
    return await client.nodes.update_status(node)


async def until_cached(client: Client, obj: v1.Project) -> None:
    """Return once the apiserver's watch cache holds `obj`'s version (the node-delete check reads that cache)."""
    version = int(obj.metadata.resource_version)
    async with asyncio.timeout(10):
        async for event in client.projects.watch(resource_version=str(version - 1)):
            if int(event.object.metadata.resource_version) >= version:
                return


def lines(text: str) -> list[str]:
    return text.splitlines()


def young(text: str) -> list[str]:
    """`lines(text)` with every age of a few seconds ("1s" … "9s", as a loaded machine may take between writing an
    object and printing it) shown as "0s"."""
    return [re.sub(r"(?<![\w.])[1-9]s(?=\s|$)", "0s", line) for line in lines(text)]


# ---- apply ----------------------------------------------------------------------------------------------------


async def test_apply_creates_then_unchanged_then_configured(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    path = write(tmp_path, "web.yaml", WEB)
    first = await cli("apply", "-f", path)
    assert (first.exit_code, first.stdout) == (0, "project/web created\n")
    again = await cli("apply", "-f", path)
    assert (again.exit_code, again.stdout) == (0, "project/web unchanged\n")

    write(tmp_path, "web.yaml", WEB.replace("nginx:1.27", "nginx:1.28").replace(", tier: front", ""))
    changed = await cli("apply", "-f", path)
    assert (changed.exit_code, changed.stdout) == (
        0,
        "project/web configured\nproject/web: metadata.labels[tier] removed (not in the applied manifest)\n",
    )
    stored = await client.projects.get("web")
    assert stored.spec.services[0].image == "nginx:1.28"
    assert dict(stored.metadata.labels) == {"app": "web"}
    assert LAST_APPLIED in stored.metadata.annotations


async def test_apply_keeps_labels_others_set(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    path = write(tmp_path, "web.yaml", WEB)
    await cli("apply", "-f", path)
    obj = await client.projects.get("web")
    obj.metadata.labels["owner"] = "ops"
    await client.projects.update(obj)
    result = await cli("apply", "-f", path)
    assert result.stdout == "project/web unchanged\n"
    assert (await client.projects.get("web")).metadata.labels["owner"] == "ops"


async def test_apply_node_changes_spec_and_labels_never_status(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    await ready_node(client, "n1", labels={"agent/arch": "amd64"})
    manifest = """\
apiVersion: caravanserai/v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status: {state: NotReady}
---
apiVersion: caravanserai/v1
kind: Node
metadata: {name: n2}
spec: {unschedulable: true}
"""
    result = await cli("apply", "-f", write(tmp_path, "nodes.yaml", manifest))
    assert (result.exit_code, lines(result.stdout)) == (0, ["node/n1 configured", "node/n2 created"])
    n1 = await client.nodes.get("n1")
    assert dict(n1.metadata.labels) == {"agent/arch": "amd64", "zone": "a"}
    assert n1.spec.hostname == "n1"  # kept: the manifest does not set it
    assert [t.key for t in n1.spec.taints] == ["dedicated"]
    assert n1.status.state == v1.NODE_READY
    assert (await client.nodes.get("n2")).spec.unschedulable


async def test_apply_says_what_the_three_way_merge_removed(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    first = """\
apiVersion: caravanserai/v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
spec:
  taints: [{key: dedicated, value: db, effect: NoSchedule}, {key: slow, effect: PreferNoSchedule}]
"""
    second = """\
apiVersion: caravanserai/v1
kind: Node
metadata: {name: n1, labels: {tier: edge}}
spec:
  taints: [{key: slow, effect: PreferNoSchedule}]
"""
    third = "apiVersion: caravanserai/v1\nkind: Node\nmetadata: {name: n1, labels: {tier: edge}}\n"
    created = await cli("apply", "-f", write(tmp_path, "first.yaml", first))
    assert lines(created.stdout) == ["node/n1 created"]
    result = await cli("apply", "-f", write(tmp_path, "second.yaml", second))
    assert (result.exit_code, lines(result.stdout)) == (
        0,
        [
            "node/n1 configured",
            "node/n1: metadata.labels[zone] removed (not in the applied manifest)",
            "node/n1: spec.taints[dedicated] removed (not in the applied manifest)",
        ],
    )
    assert [t.key for t in (await client.nodes.get("n1")).spec.taints] == ["slow"]
    as_json = await cli("apply", "-f", write(tmp_path, "third.yaml", third), "-o", "name")
    assert as_json.stdout == "node/n1\n"  # the output stays clean; the removal goes to stderr
    assert as_json.stderr == "node/n1: spec.taints[slow] removed (not in the applied manifest)\n"
    unchanged = await cli("apply", "-f", write(tmp_path, "third.yaml", third))
    assert lines(unchanged.stdout) == ["node/n1 unchanged"]


async def test_apply_reports_bad_documents_and_applies_the_others(
    cli: Caractrl, client: Client, tmp_path: Path
) -> None:
    manifest = (
        WEB.replace("    image:", "    imag:") + "---\n" + WEB.replace("name: web\n  labels", "name: ok\n  labels")
    )
    manifest += "---\n" + WEB.replace("name: web\n  labels", "name: noimage\n  labels").replace(
        "    image: nginx:1.27\n", ""
    )
    path = write(tmp_path, "mixed.yaml", manifest)
    result = await cli("apply", "-f", path)
    assert result.exit_code == 1
    assert result.stdout == "project/ok created\n"
    errors = lines(result.stderr)
    assert (
        errors[0] == f'error: {path}, document 1, line 9: spec.services[0].imag: unknown field (did you mean "image"?)'
    )
    assert errors[1].startswith(
        f'Error from server (Invalid): {path}, document 3, line 28: project "noimage" is invalid: '
    )
    assert "spec.services[0].image: is required" in errors[1]
    assert len(errors) == 2
    with pytest.raises(NotFound):
        await client.projects.get("noimage")


async def test_apply_from_stdin_and_directory(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a.yaml").write_text(WEB.replace("name: web\n  labels", "name: a\n  labels"))
    (folder / "b.json").write_text(
        json.dumps(
            {
                "apiVersion": "caravanserai/v1",
                "kind": "Project",
                "metadata": {"name": "b"},
                "spec": {"services": [{"name": "b", "image": "busybox"}]},
            }
        )
    )
    (folder / "notes.txt").write_text("not a manifest")
    result = await cli("apply", "-f", str(folder), "-f", "-", input=WEB)
    assert (result.exit_code, lines(result.stdout)) == (
        0,
        ["project/a created", "project/b created", "project/web created"],
    )
    as_json = await cli("apply", "-f", "-", "-o", "json", input=WEB)
    assert json.loads(as_json.stdout)["metadata"]["name"] == "web"


async def test_apply_refuses_other_kinds_and_missing_files(cli: Caractrl, tmp_path: Path) -> None:
    lease = "apiVersion: caravanserai/v1\nkind: Lease\nmetadata: {name: l1}\n"
    result = await cli("apply", "-f", write(tmp_path, "lease.yaml", lease), "-f", str(tmp_path / "missing.yaml"))
    assert result.exit_code == 1
    assert "kind Lease cannot be applied" in result.stderr
    assert f"{tmp_path / 'missing.yaml'}: cannot read: No such file or directory" in result.stderr


# ---- get ------------------------------------------------------------------------------------------------------


async def test_get_empty_list(cli: Caractrl) -> None:
    result = await cli("get", "projects")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "No resources found in default namespace.\n")
    everywhere = await cli("get", "projects", "-A")
    assert (everywhere.exit_code, everywhere.stderr) == (0, "No resources found.\n")
    cluster_wide = await cli("get", "nodes")
    assert (cluster_wide.exit_code, cluster_wide.stderr) == (0, "No resources found.\n")


async def test_get_tables(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1", labels={"zone": "a"})
    lease = builders.lease("n1")
    lease.spec.renew_time.CopyFrom(timestamp(time.time()))
    await client.leases.create(lease)
    await client.projects.create(builders.project("web", services=2))
    await client.projects.create(builders.project("db"))
    await bind(client, "web", "n1")

    nodes = await cli("get", "nodes")
    assert young(nodes.stdout) == [
        "NAME   STATE   SCHEDULABLE   CPU   MEMORY   PROJECTS   AGE",
        "n1     Ready   true          4     8Gi      1          0s",
    ]
    wide = await cli("get", "no", "-o", "wide")
    assert lines(wide.stdout)[0].split() == [
        "NAME",
        "STATE",
        "SCHEDULABLE",
        "CPU",
        "MEMORY",
        "PROJECTS",
        "AGE",
        "LABELS",
        "ADDRESS",
        "THROUGHPUT",
        "IMAGES",
        "LAST-HEARTBEAT",
    ]
    assert young(wide.stdout)[1].split()[7:] == ["zone=a", "127.0.0.1", "<none>", "0", "0s"]

    projects = await cli("get", "p")
    assert young(projects.stdout) == [
        "NAME   PHASE       NODE     READY   RESTARTS   AGE",
        "db     Pending     <none>   0/1     0          0s",
        "web    Scheduled   n1       0/2     0          0s",
    ]
    leases = await cli("get", "leases")
    assert young(leases.stdout)[1].split() == ["n1", "n1", "0s"]


async def test_get_formats_names_and_selectors(cli: Caractrl, client: Client) -> None:
    await client.projects.create(builders.project("web", labels={"app": "web"}))
    await client.projects.create(builders.project("db", labels={"app": "db"}))

    before = await cli("--output", "json", "get", "projects", "web")
    after = await cli("get", "project", "web", "-o", "json")
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert json.loads(after.stdout)["kind"] == "Project"

    listed = json.loads((await cli("get", "projects", "-o", "json")).stdout)
    assert (listed["apiVersion"], listed["kind"]) == ("caravanserai/v1", "ProjectList")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["db", "web"]

    assert "kind: ProjectList" in (await cli("get", "p", "web", "db", "-o", "yaml")).stdout
    assert (await cli("get", "p", "-l", "app=db", "-o", "name")).stdout == "project/db\n"
    assert (await cli("get", "p/web", "-o", "name")).stdout == "project/web\n"
    pending = await cli("get", "p", "--field-selector", "status.phase=Pending", "--no-headers")
    assert [line.split()[0] for line in lines(pending.stdout)] == ["db", "web"]


async def test_get_missing_name_is_an_error_but_shows_the_rest(cli: Caractrl, client: Client) -> None:
    await client.projects.create(builders.project("web"))
    result = await cli("get", "projects", "web", "nope")
    assert result.exit_code == 1
    assert lines(result.stdout)[1].startswith("web ")
    assert result.stderr == 'Error from server (NotFound): projects "nope" not found\n'
    ignored = await cli("get", "projects", "nope", "--ignore-not-found")
    assert (ignored.exit_code, ignored.stdout, ignored.stderr) == (0, "", "")


async def test_get_events(cli: Caractrl, client: Client) -> None:
    event = meta.with_type_meta(v1.Event())
    event.metadata.name = "web.1"
    event.spec.involved_object.kind = "Project"
    event.spec.involved_object.name = "web"
    event.spec.type, event.spec.reason, event.spec.message = "Warning", "FailedScheduling", "0/1 nodes are available"
    event.spec.last_timestamp.CopyFrom(timestamp(time.time()))
    await client.events.create(event)
    result = await cli("get", "events")
    assert lines(result.stdout) == [
        "LAST SEEN   TYPE      REASON             OBJECT        MESSAGE",
        "0s          Warning   FailedScheduling   project/web   0/1 nodes are available",
    ]


async def test_usage_errors_exit_2(cli: Caractrl) -> None:
    unknown = await cli("get", "widgets")
    assert unknown.exit_code == 2
    first = lines(unknown.stderr)[0]
    assert first.startswith('error: the server doesn\'t have a resource type "widgets" (known: '), first
    known = first.split("(known: ", 1)[1].rstrip(")").split(", ")
    assert known == sorted(known)
    built_in = ["admissionpolicies", "backuprepositories", "configs", "events", "leases", "nodes", "projects"]
    assert [k for k in known if k in built_in] == built_in  # custom kinds other tests here defined may be listed too
    bad_output = await cli("get", "projects", "-o", "xml")
    assert bad_output.exit_code == 2
    assert lines(bad_output.stderr)[0].startswith("error: Invalid value for '-o'")


# ---- describe -------------------------------------------------------------------------------------------------


async def test_describe_pending_project_shows_the_scheduler_reason(cli: Caractrl, client: Client) -> None:
    project = await client.projects.create(builders.project("big", requests={"cpu": "64"}))
    message = "0/1 nodes are available: 1 insufficient cpu"
    meta.set_condition(
        project.status.conditions,
        v1.CONDITION_SCHEDULED,
        v1.FALSE,
        reason="Unschedulable",
        message=message,
        now=time.time(),
    )
    await client.projects.update_status(project)
    event = meta.with_type_meta(v1.Event())
    event.metadata.name = "big.1"
    event.spec.involved_object.kind, event.spec.involved_object.name = "Project", "big"
    event.spec.type, event.spec.reason, event.spec.message = "Warning", "FailedScheduling", message
    await client.events.create(event)

    result = await cli("describe", "project", "big")
    assert result.exit_code == 0
    head = lines(result.stdout)[:5]
    assert head[0].split() == ["Name:", "big"]
    assert head[2].split() == ["Phase:", "Pending"]
    assert head[3].split() == ["Reason:", "Unschedulable"]
    assert head[4] == f"Message:              {message}"
    assert "Requests:        cpu=64" in result.stdout
    events = result.stdout.split("Events:\n")[1]
    assert "FailedScheduling" in events and "cara" not in events


async def test_describe_node(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1", agent_port=7421)
    await client.projects.create(builders.project("web", requests={"cpu": "500m", "memory": "1Gi"}))
    await bind(client, "web", "n1")
    result = await cli("describe", "node", "n1")
    text = result.stdout
    assert "Schedulable:       true" in text
    assert "Agent Port:     7421" in text
    assert "Allocated (requests of bound projects):\n  cpu:     500m\n  memory:  1Gi" in text
    assert lines(text.split("Projects:\n")[1])[0].split() == ["NAMESPACE", "NAME", "PHASE", "SERVICES", "AGE"]
    assert lines(text.split("Projects:\n")[1])[1].split()[:4] == ["default", "web", "Scheduled", "0/1"]
    missing = await cli("describe", "node", "nope")
    assert (missing.exit_code, missing.stderr) == (1, 'Error from server (NotFound): nodes "nope" not found\n')


# ---- delete, wait ---------------------------------------------------------------------------------------------


async def test_delete_pending_scheduled_and_forced(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    await ready_node(client, "n1")
    for name in ("pending", "running", "forced"):
        await client.projects.create(builders.project(name))
    await bind(client, "running", "n1")
    await until_cached(client, await bind(client, "forced", "n1"))

    result = await cli("delete", "project", "pending", "running", "nope")
    assert result.exit_code == 1
    assert lines(result.stdout) == ["project/pending deleted", "project/running marked for deletion (Terminating)"]
    assert result.stderr == 'Error from server (NotFound): projects "nope" not found\n'
    assert (await client.projects.get("running")).status.phase == v1.TERMINATING

    busy = await cli("delete", "node", "n1")
    assert busy.exit_code == 1
    assert busy.stderr.startswith("Error from server (FailedPrecondition): ")

    forced = await cli(
        "delete",
        "-f",
        write(tmp_path, "f.yaml", WEB.replace("name: web\n  labels", "name: forced\n  labels")),
        "--force",
    )
    assert forced.stdout == "project/forced deleted\n"


async def test_delete_wait_times_out_while_terminating(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await client.projects.create(builders.project("web"))
    await bind(client, "web", "n1")
    result = await cli("delete", "project", "web", "--wait", "--timeout", "0.5s")
    assert result.exit_code == 1
    assert result.stderr == "error: timed out waiting for the condition on projects/web\n"


async def test_wait_times_out_then_sees_the_change(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await client.projects.create(builders.project("web"))
    late = await cli("wait", "project", "web", "--for", "phase=Scheduled", "--timeout", "0.5s")
    assert (late.exit_code, late.stderr) == (1, "error: timed out waiting for the condition on projects/web\n")

    waiting = asyncio.create_task(
        cli("wait", "project", "web", "--for", "phase=Scheduled", "--for", "condition=Scheduled", "--timeout", "20s")
    )
    await asyncio.sleep(0.3)
    await bind(client, "web", "n1")
    met = await waiting
    assert (met.exit_code, met.stdout) == (0, "project/web condition met\n")

    gone = asyncio.create_task(cli("wait", "p", "web", "--for", "delete", "--timeout", "20s"))
    await asyncio.sleep(0.3)
    await client.projects.delete("web", force=True)
    assert (await gone).stdout == "project/web condition met\n"


async def test_wait_reports_failed_project_at_once(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await client.projects.create(builders.project("web"))
    project = await bind(client, "web", "n1")
    meta.set_phase(project, v1.FAILED, reason="ImageMissing", message="no such image", now=time.time())
    await client.projects.update_status(project)
    result = await cli("wait", "project", "web", "--for", "phase=Running", "--timeout", "20s")
    assert (result.exit_code, result.stderr) == (1, "error: project/web is Failed: ImageMissing: no such image\n")


# ---- nodes ----------------------------------------------------------------------------------------------------


async def test_cordon_uncordon_drain(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    assert (await cli("cordon", "n1")).stdout == "node/n1 cordoned\n"
    assert (await cli("cordon", "n1")).stdout == "node/n1 already cordoned\n"
    assert (await client.nodes.get("n1")).spec.unschedulable
    assert (await cli("uncordon", "n1")).stdout == "node/n1 uncordoned\n"
    assert not (await client.nodes.get("n1")).spec.unschedulable

    await client.projects.create(builders.project("web"))
    await bind(client, "web", "n1")
    declined = await cli("drain", "n1", "--delete", input="n\n")
    assert declined.exit_code == 1
    assert "stays cordoned" in declined.stderr
    assert (await client.projects.get("web")).status.phase == v1.SCHEDULED

    drained = await cli("drain", "n1", "--delete", "--yes")
    assert lines(drained.stdout) == [
        "node/n1 already cordoned",
        "project/web marked for deletion (Terminating)",
        "node/n1 drained",
    ]
    assert (await client.projects.get("web")).status.phase == v1.TERMINATING
    missing = await cli("cordon", "nope")
    assert (missing.exit_code, missing.stderr) == (1, 'Error from server (NotFound): nodes "nope" not found\n')


# ---- logs -----------------------------------------------------------------------------------------------------


class FakeAgent(api_pb2_grpc.AgentServicer):
    """An agent's log service: two lines per service."""

    def __init__(self) -> None:
        self.requests: list[v1.LogsRequest] = []

    async def Logs(self, request: v1.LogsRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[v1.LogLine]:  # noqa: N802
        self.requests.append(request)
        for service in [request.service] if request.service else ["api", "db"]:
            for n in (1, 2):
                yield v1.LogLine(service=service, stream="stdout", data=f"{service} line {n}\n".encode())


@contextlib.asynccontextmanager
async def fake_agent() -> AsyncIterator[tuple[FakeAgent, int]]:
    agent = FakeAgent()
    server = grpc.aio.server()
    api_pb2_grpc.add_AgentServicer_to_server(agent, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield agent, port
    finally:
        await server.stop(None)


async def test_logs_through_the_agent(cli: Caractrl, client: Client) -> None:
    async with fake_agent() as (agent, port):
        await ready_node(client, "n1", agent_port=port)
        await client.projects.create(builders.project("web", services=["api", "db"]))
        await bind(client, "web", "n1")

        every = await cli("logs", "web", "--tail", "5")
        assert lines(every.stdout) == ["[api] api line 1", "[api] api line 2", "[db] db line 1", "[db] db line 2"]
        one = await cli("logs", "web/db", "--timestamps")
        assert lines(one.stdout) == ["db line 1", "db line 2"]
        assert [(r.project, r.service, r.tail, r.timestamps) for r in agent.requests] == [
            ("web", "", 5, False),
            ("web", "db", -1, True),
        ]
        unknown = await cli("logs", "web/cache")
        assert unknown.stderr == 'error: project "web" has no service "cache" (services: api, db)\n'

    await client.projects.create(builders.project("pending"))
    pending = await cli("logs", "pending")
    assert pending.exit_code == 1
    assert pending.stderr.startswith('error: project "pending" is not on a node (phase Pending)')
    gone = await cli("logs", "web")
    assert gone.exit_code == 1
    assert gone.stderr.startswith(f"error: cannot reach the agent of node/n1 at 127.0.0.1:{port}")


# ---- connection, config, misc ---------------------------------------------------------------------------------


async def test_unreachable_server_names_the_address(cli: Caractrl) -> None:
    address = f"127.0.0.1:{free_port()}"
    result = await cli("--server", address, "get", "projects", server=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot reach the Caravanserai API server at {address}")
    assert len(lines(result.stderr)) == 1


async def test_unreachable_server_is_said_for_a_custom_kind(cli: Caractrl) -> None:
    address = f"127.0.0.1:{free_port()}"
    result = await cli("--server", address, "get", "widgets", server=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot reach the Caravanserai API server at {address}"), result.stderr
    assert "resource type" not in result.stderr
    assert len(lines(result.stderr)) == 1


async def test_config_file_supplies_the_server(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    await client.projects.create(builders.project("web"))
    config = Path(cli.env["XDG_CONFIG_HOME"] or "") / "caravanserai" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"server: {cli.address}\n")
    assert (await cli("get", "p", "-o", "name", server=False)).stdout == "project/web\n"

    other = write(tmp_path, "other.yaml", "server: 127.0.0.1:1\nbogus: 1\n")
    bad = await cli("--config", other, "get", "p", server=False)
    assert (bad.exit_code, bad.stderr) == (
        1,
        f"error: config file {other}: unknown key(s) bogus; known: namespace, server, tls, token\n",
    )
    missing = await cli("--config", str(tmp_path / "nope.yaml"), "get", "p")
    assert missing.stderr == f"error: config file {tmp_path / 'nope.yaml'} does not exist\n"


async def test_version_completion_and_schema(cli: Caractrl) -> None:
    version = await cli("--version", server=False)
    assert version.stdout.startswith("caractrl ")
    bash = await cli("completion", "bash", server=False)
    assert "_CARACTRL_COMPLETE=bash_complete" in bash.stdout
    assert "compdef" in (await cli("completion", "zsh", server=False)).stdout
    # The stubs' comments are parsed here first, in this thread: CPython 3.11 shares ast's recursion-depth state
    # between threads, so caractrl's ast.parse in its worker thread can fail with a spurious SystemError while this
    # thread formats a traceback (asyncio logging grpc callbacks aimed at an earlier command's closed loop).
    assert proto_docs()["Service"]
    schema = json.loads((await cli("schema", "project", server=False)).stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    service = schema["$defs"]["Service"]
    assert service["required"] == ["name", "image"] and service["additionalProperties"] is False


# ---- subprocesses: the console script and get --watch -----------------------------------------------------------


async def read_until(stream: asyncio.StreamReader, predicate: str, timeout: float = 15.0) -> list[str]:
    """Lines read until one contains `predicate`."""
    seen: list[str] = []
    async with asyncio.timeout(timeout):
        while True:
            line = (await stream.readline()).decode()
            assert line, f"stream ended; saw {seen}"
            seen.append(line.rstrip("\n"))
            if predicate in line:
                return seen


async def test_console_script_exit_codes(api: RunningApiServer) -> None:
    proc = await asyncio.create_subprocess_exec(
        CARACTRL,
        "--server",
        api.address,
        "get",
        "project",
        "nope",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert (proc.returncode, out, err.decode()) == (1, b"", 'Error from server (NotFound): projects "nope" not found\n')


async def test_shell_completion_offers_object_names(api: RunningApiServer, client: Client) -> None:
    await client.projects.create(builders.project("web"))
    await client.projects.create(builders.project("worker"))
    env = {
        **os.environ,
        "_CARACTRL_COMPLETE": "bash_complete",
        "COMP_CWORD": "5",
        "COMP_WORDS": f"caractrl --server {api.address} get projects w",
    }
    proc = await asyncio.create_subprocess_exec(CARACTRL, env=env, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert out.decode().split() == ["plain,web", "plain,worker"]


async def test_get_watch_survives_an_apiserver_restart(api: RunningApiServer, client: Client, etcd: EtcdServer) -> None:
    await client.projects.create(builders.project("first"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caravanserai.cli",
        "--server",
        api.address,
        "get",
        "projects",
        "-w",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    restarted: RunningApiServer | None = None
    try:
        seen = await read_until(proc.stdout, "first")
        assert seen[0].split() == ["NAME", "PHASE", "NODE", "READY", "RESTARTS", "AGE"]
        await client.projects.create(builders.project("second"))
        assert (await read_until(proc.stdout, "second"))[-1].split()[:2] == ["second", "Pending"]

        await api.stop()
        restarted = await start_apiserver(etcd.endpoint, prefix=api.prefix, listen=api.address, bookmark_interval=0.2)
        async with Client(api.address, retry_timeout=10) as fresh:
            await wait_for(lambda: fresh.projects.create(builders.project("third")), timeout=10)
        assert (await read_until(proc.stdout, "third"))[-1].split()[0] == "third"
    finally:
        proc.kill()
        await proc.wait()
        if restarted is not None:
            await restarted.stop()


# ---- TLS ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA with certificates for the apiserver, an admin and a viewer, made by deploy/certs.sh."""
    out = tmp_path_factory.mktemp("cli-certs")
    script = Path(__file__).resolve().parents[2] / "deploy" / "certs.sh"
    subprocess.run([str(script), str(out), "apiserver", "admin", "viewer"], check=True, capture_output=True)
    (out / "tokens.csv").write_text("viewer-token,viewer\n")
    return out


async def test_mutual_tls_from_flags_and_config(etcd: EtcdServer, certs: Path, tmp_path: Path) -> None:
    server_tls = TLSFiles(cert=str(certs / "apiserver.crt"), key=str(certs / "apiserver.key"), ca=str(certs / "ca.crt"))
    secure = await start_apiserver(etcd.endpoint, tls=server_tls, token_file=str(certs / "tokens.csv"))
    try:
        cli = Caractrl(secure.address, tmp_path)
        flags = [
            "--tls-ca",
            str(certs / "ca.crt"),
            "--tls-cert",
            str(certs / "admin.crt"),
            "--tls-key",
            str(certs / "admin.key"),
        ]
        created = await cli(*flags, "apply", "-f", "-", input=WEB)
        assert (created.exit_code, created.stdout) == (0, "project/web created\n")
        plaintext = await cli("get", "p")
        assert plaintext.exit_code == 1
        assert plaintext.stderr.startswith(f"error: cannot reach the Caravanserai API server at {secure.address}")
        half = await cli("--tls-cert", str(certs / "admin.crt"), "get", "p")
        assert (half.exit_code, half.stderr) == (1, "error: --tls-cert and --tls-key must be given together\n")

        config = tmp_path / "caravanserai" / "config.yaml"
        config.parent.mkdir()
        config.write_text(
            f"server: {secure.address}\ntls: {{ca: {certs / 'ca.crt'}, cert: {certs / 'viewer.crt'}, "
            f"key: {certs / 'viewer.key'}}}\n"
        )
        viewer = await cli("get", "p", "-o", "name", server=False)
        assert (viewer.exit_code, viewer.stdout) == (0, "project/web\n")
        refused = await cli("delete", "project", "web", server=False)
        assert refused.exit_code == 1
        assert refused.stderr.startswith("Error from server (Forbidden): ")

    finally:
        await secure.stop()
