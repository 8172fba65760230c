"""The node agent and namespaces: references read in the project's namespace, data files and the Agent service's
requests kept apart by namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from caravanserai import v1
from caravanserai.agent.access.execstream import ExecRunner
from caravanserai.agent.access.logs import LogStreamer
from caravanserai.agent.access.portforward import PortForwarder
from caravanserai.agent.docker.records import ContainerSummary, Observed
from caravanserai.agent.ingress.endpoints import NoEndpoint, ServiceEndpoints
from caravanserai.agent.volumes.repository import RepositoryResolver
from caravanserai.agent.workload.datafiles import DataFiles
from caravanserai.agent.workload.servicedata import ServiceData
from caravanserai.api.v1 import api_pb2
from caravanserai.testing import FakeClient
from caravanserai.testing.builders import project

TEAMS = ("team-a", "team-b")


def secret(name: str, namespace: str, **data: bytes) -> v1.Secret:
    found = v1.Secret(metadata=v1.ObjectMeta(name=name, namespace=namespace))
    found.spec.data.update(data)
    return found


def reading(namespace: str, secret_name: str = "creds") -> v1.Project:
    """Project `web` of `namespace` whose service reads TOKEN from Secret `secret_name`."""
    p = project("web", services=["app"])
    p.metadata.namespace = namespace
    var = p.spec.services[0].env.add(name="TOKEN")
    var.value_from.secret, var.value_from.key = secret_name, "token"
    return p


async def test_secrets_are_read_in_the_projects_namespace(tmp_path: Path) -> None:
    client = FakeClient()
    for namespace in ("default", *TEAMS):
        await client.secrets.create(secret("creds", namespace, token=namespace.encode()))
    data = ServiceData(client, DataFiles(str(tmp_path)))  # type: ignore[arg-type]  # the fake has the calls it makes
    for namespace in ("default", *TEAMS):
        inputs = await data.inputs(reading(namespace))
        assert inputs.services["app"].env == (f"TOKEN={namespace}",)


async def test_a_secret_of_another_namespace_is_missing(tmp_path: Path) -> None:
    client = FakeClient()
    await client.secrets.create(secret("only-a", "team-a", token=b"a"))
    data = ServiceData(client, DataFiles(str(tmp_path)))  # type: ignore[arg-type]  # the fake has the calls it makes
    inputs = await data.inputs(reading("team-b", "only-a"))
    assert inputs.blocked == {"app": 'secret "only-a" (not found)'}


async def test_a_backup_repository_and_its_secret_are_read_in_the_projects_namespace() -> None:
    client = FakeClient()
    for namespace in TEAMS:
        repository = v1.BackupRepository(metadata=v1.ObjectMeta(name="offsite", namespace=namespace))
        repository.spec.url, repository.spec.secret = f"/srv/{namespace}", "restic"
        await client.backuprepositories.create(repository)
        await client.secrets.create(secret("restic", namespace, RESTIC_PASSWORD=namespace.encode()))
    resolver = RepositoryResolver(client)  # type: ignore[arg-type]  # the fake has the calls it makes
    for namespace in TEAMS:
        found = await resolver.resolve("offsite", namespace=namespace)
        assert (found.url, found.env["RESTIC_PASSWORD"]) == (f"/srv/{namespace}", namespace)
    assert resolver.uses_secret("team-a", ["offsite"], "restic")
    assert not resolver.uses_secret("default", ["offsite"], "restic")  # not resolved in `default`


def test_data_files_of_two_namespaces_are_apart_and_default_keeps_its_directory(tmp_path: Path) -> None:
    files = DataFiles(str(tmp_path))
    paths = {key: Path(files.write(key, "creds", {"k": key.encode()}, mode=0o400)) for key in ("web", "team-a/web")}
    assert paths["web"].parent == tmp_path / "web"  # a `default` project: as before namespaces
    assert paths["team-a/web"].parent == tmp_path / "team-a_web"
    files.remove("team-a/web")
    assert not paths["team-a/web"].exists() and (paths["web"] / "k").read_bytes() == b"web"


@dataclass
class Runtime:
    """A Docker stand-in that records what the access services ask for."""

    filters: list[list[str]] = field(default_factory=list)
    inspected: list[str] = field(default_factory=list)

    async def list_containers(self, label_filter: list[str]) -> list[ContainerSummary]:
        self.filters.append(label_filter)
        return []

    async def inspect_container(self, name: str) -> Observed | None:
        self.inspected.append(name)
        return None


async def _once(*items: object) -> AsyncIterator[object]:
    for item in items:
        yield item


@pytest.mark.parametrize(("namespace", "label"), [("", "project=web"), ("default", "project=web"), *(
    (ns, f"project={ns}/web") for ns in TEAMS)])  # fmt: skip
async def test_logs_are_read_from_the_namespace_the_request_names(namespace: str, label: str) -> None:
    runtime = Runtime()
    streamer = LogStreamer(runtime, node="n1")  # type: ignore[arg-type]  # the stand-in has the calls made
    shown = "web" if namespace in ("", "default") else f"{namespace}/web"  # messages name `default`'s as before
    with pytest.raises(LookupError, match=f"no containers for project {shown} on this node"):
        async for _ in streamer.stream(api_pb2.LogsRequest(project="web", namespace=namespace)):
            pass
    assert f"caravanserai.io/{label}" in runtime.filters[0]


@pytest.mark.parametrize(("namespace", "name"), [("", "cara_web_app_n1"), ("team-a", "cara_team-a_web_app_n1")])
async def test_port_forward_and_exec_reach_the_container_of_the_requests_namespace(namespace: str, name: str) -> None:
    runtime = Runtime()
    endpoints = ServiceEndpoints(runtime, node="n1")  # type: ignore[arg-type]  # the stand-in has the calls made
    forward = api_pb2.PortForwardRequest(project="web", namespace=namespace, service="app", port=80)
    with pytest.raises(NoEndpoint):
        async for _ in PortForwarder(endpoints).forward(_once(forward)):  # type: ignore[arg-type]  # the requests
            pass
    start = api_pb2.ExecStart(project="web", namespace=namespace, service="app", command=["true"])
    with pytest.raises(NoEndpoint):
        requests = _once(api_pb2.ExecRequest(start=start))
        async for _ in ExecRunner(endpoints).run(requests):  # type: ignore[arg-type]  # the requests of a stream
            pass
    assert runtime.inspected == [name, name]


@dataclass
class Projects:
    """An informer's `list()` over fixed projects."""

    items: list[v1.Project]

    def list(self) -> list[v1.Project]:
        return self.items


def test_a_secret_wakes_only_the_projects_of_its_namespace() -> None:
    from caravanserai.agent.agent import _readers

    projects = Projects([reading(ns) for ns in ("default", *TEAMS)])
    resolver = RepositoryResolver(FakeClient())  # type: ignore[arg-type]  # the fake has the calls it makes
    readers = _readers(projects, resolver)  # type: ignore[arg-type]  # the stand-in has the informer's `list`
    assert readers(secret("creds", "team-a")) == ["team-a/web"]
    assert readers(secret("creds", "default")) == ["default/web"]
    assert readers(secret("other", "team-b")) == []
