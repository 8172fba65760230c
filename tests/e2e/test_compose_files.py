"""The three Compose files of examples/compose, applied with `caractrl apply -f` to a real apiserver and agent on
real Docker, reach Running: a web app with a database and a worker; a reverse proxy serving a folder of the host
(a bind mount, a HostPath volume); a stack ordered by healthchecks and depends_on conditions.

The files name their image as `${IMAGE:-…}`: the tests set it to the local busybox test image (nothing is pulled).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, container_ids, docker, wait_phase
from click.testing import CliRunner

from caravanserai import meta, v1
from caravanserai.cli.caractrl import caractrl
from caravanserai.client import Client
from caravanserai.testing import free_port
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.wait import wait_for
from support import http

pytestmark = pytest.mark.docker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "compose"


async def apply_compose(api: RunningApiServer, path: Path, **variables: str) -> str:
    """`caractrl apply -f PATH` with `variables` in the environment; returns its stdout."""
    env = {"CARA_CONFIG": None, "CARA_TOKEN": None, "CARA_SERVER": None, **variables}
    argv = ["--server", api.address, "apply", "-f", str(path)]
    result = await asyncio.to_thread(CliRunner(env=env).invoke, caractrl, argv)
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return result.stdout


async def ready(client: Client, name: str, *, timeout: float = 60.0) -> v1.Project:
    """Wait until the project is Running with its Ready condition true."""

    async def check() -> v1.Project | None:
        project = await client.projects.get(name)
        condition = meta.get_condition(project.status.conditions, v1.CONDITION_READY)
        ok = project.status.phase == v1.RUNNING and condition is not None and condition.status == v1.TRUE
        return project if ok else None

    return await wait_for(check, timeout=timeout, message=f"project {name} Running and Ready")


async def http_get(url: str) -> str:
    """The body of a GET of `url`, retried until it answers 200 (a published port may take a moment)."""

    async def answered() -> str | None:
        try:
            return (await asyncio.to_thread(http.get_ok, url, timeout=2)).decode()
        except OSError:
            return None

    return await wait_for(answered, timeout=30, message=f"GET {url}")


async def remove(client: Client, name: str) -> None:
    await client.projects.delete(name)
    await wait_phase(client, name, v1.TERMINATED, timeout=60)


async def test_web_app_with_database_and_worker(
    api: RunningApiServer, client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    port = free_port()
    out = await apply_compose(api, EXAMPLES / "webapp", IMAGE=image, WEB_PORT=str(port), DB_PASSWORD="s3cret")
    assert out == "project/webapp created\n"
    await bind(client, "webapp", agent.node)
    try:
        project = await ready(client, "webapp")
        assert [(s.name, s.state) for s in project.status.services] == [
            ("web", "running"),
            ("db", "running"),
            ("worker", "running"),
        ]
        assert await http_get(f"http://127.0.0.1:{port}/") == "webapp is up\n"
        web = project.spec.services[0]
        assert {e.name: e.value for e in web.env}["DATABASE_URL"] == "postgres://app:s3cret@db:5432/app"
        assert [(v.name, v.type) for v in project.spec.volumes] == [("db-data", "Persistent")]
    finally:
        await remove(client, "webapp")


async def test_reverse_proxy_serving_a_folder_of_the_host(
    api: RunningApiServer, client: Client, start_agent: StartAgent, image: str, tmp_path: Path
) -> None:
    agent = await start_agent()
    site = tmp_path / "site"
    shutil.copytree(EXAMPLES / "reverse-proxy" / "site", site)
    port = free_port()
    out = await apply_compose(api, EXAMPLES / "reverse-proxy", IMAGE=image, PROXY_PORT=str(port), SITE_DIR=str(site))
    assert out == "project/reverse-proxy created\n"
    await bind(client, "reverse-proxy", agent.node)
    try:
        project = await ready(client, "reverse-proxy")
        assert [(v.name, v.type, v.host_path) for v in project.spec.volumes] == [("site", "HostPath", str(site))]
        assert "served from a folder of the host" in await http_get(f"http://127.0.0.1:{port}/")
        assert await http_get(f"http://127.0.0.1:{port}/cgi-bin/api/hello.txt") == "hello from the app\n"
        (site / "new.txt").write_text("written on the host\n")  # a bind mount: the host's change is seen at once
        assert await http_get(f"http://127.0.0.1:{port}/new.txt") == "written on the host\n"
    finally:
        await remove(client, "reverse-proxy")


async def test_stack_ordered_by_healthchecks_and_conditions(
    api: RunningApiServer, client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    assert await apply_compose(api, EXAMPLES / "healthchecks", IMAGE=image) == "project/healthchecks created\n"
    await bind(client, "healthchecks", agent.node)
    try:

        async def settled() -> v1.Project | None:
            project = await client.projects.get("healthchecks")
            states = {s.name: (s.state, s.health) for s in project.status.services}
            done = states.get("migrate", ("", ""))[0] == "completed" and states.get("app") == ("running", "healthy")
            return project if project.status.phase == v1.RUNNING and done and "cache" in states else None

        project = await wait_for(settled, timeout=90, message="db healthy, migrate completed, app healthy")
        statuses = {s.name: s for s in project.status.services}
        assert (statuses["db"].state, statuses["db"].health) == ("running", "healthy")
        assert (statuses["migrate"].state, statuses["migrate"].exit_code) == ("completed", 0)
        assert statuses["cache"].state == "running"
        conditions = {d.service: d.condition for d in project.spec.services[2].depends_on}
        assert conditions == {"db": "healthy", "migrate": "completed"}
        times = {
            name.split("_")[2]: docker("inspect", "-f", "{{.State.StartedAt}} {{.State.FinishedAt}}", cid).split()
            for name, cid in container_ids(f"{NODE_LABEL}={agent.node}").items()
        }
        assert times["migrate"][1] < times["app"][0]  # app started only after migrate completed
        assert times["app"][0] < times["cache"][0]
    finally:
        await remove(client, "healthchecks")
