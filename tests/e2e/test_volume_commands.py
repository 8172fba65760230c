"""`caractrl get volumes` and `caractrl delete project NAME --volumes` against an in-process apiserver and a real
agent on real Docker: the Persistent volume is listed on its node, a plain delete keeps it (and its data), a
delete with --volumes removes it with the project."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, docker, docker_list, wait_gone, wait_phase
from click.testing import CliRunner, Result

from caravanserai import v1
from caravanserai.cli.caractrl import caractrl
from caravanserai.client import Client
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project

pytestmark = pytest.mark.docker


async def ctl(api: RunningApiServer, tmp_path: Path, *args: str) -> Result:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "CARA_SERVER": None, "CARA_CONFIG": None, "CARA_TOKEN": None}
    argv = ["--server", api.address, *args]
    result = await asyncio.to_thread(CliRunner(env=env).invoke, caractrl, argv)
    assert "Traceback" not in result.output, result.output
    return result


def with_data(name: str, image: str) -> v1.Project:
    p = project(name, image=image)
    p.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    p.spec.services[0].volume_mounts.add(name="data", mount_path="/data")
    return p


async def test_get_volumes_then_delete_keeps_or_removes_the_persistent_volume(
    client: Client, api: RunningApiServer, start_agent: StartAgent, image: str, tmp_path: Path
) -> None:
    agent = await start_agent()
    for name in ("kept", "purged"):
        await client.projects.create(with_data(name, image))
        await bind(client, name, agent.node)
        await wait_phase(client, name, v1.RUNNING)
    label = f"{NODE_LABEL}={agent.node}"
    assert docker_list("volume", label) == [f"cara_kept_data_{agent.node}", f"cara_purged_data_{agent.node}"]

    listed = await ctl(api, tmp_path, "get", "volumes")
    assert listed.exit_code == 0, listed.output
    assert [line.split() for line in listed.stdout.splitlines()] == [
        ["PROJECT", "VOLUME", "NODE", "BACKUP", "SIZE"],
        ["kept", "data", agent.node, "no", "<unknown>"],
        ["purged", "data", agent.node, "no", "<unknown>"],
    ]
    wide = await ctl(api, tmp_path, "get", "volumes", "purged", "-o", "wide")
    assert f"cara_purged_data_{agent.node}" in wide.stdout

    kept = await ctl(api, tmp_path, "delete", "project", "kept")
    assert kept.exit_code == 0, kept.output
    purged = await ctl(api, tmp_path, "delete", "project", "purged", "--volumes")
    assert (purged.exit_code, purged.stdout) == (0, "project/purged marked for deletion (Terminating)\n"), purged.output
    for name in ("kept", "purged"):
        await wait_phase(client, name, v1.TERMINATED, timeout=30)
        assert (await client.projects.delete(name)).deleted  # as gc would
        await wait_gone(client, name)
    assert docker_list("volume", label) == [f"cara_kept_data_{agent.node}"]  # a plain delete keeps the data
    docker("volume", "rm", f"cara_kept_data_{agent.node}")

    forced = await ctl(api, tmp_path, "delete", "project", "x", "--volumes", "--force")
    assert forced.exit_code == 2 and "--volumes cannot be combined with --force" in forced.output
    node = await ctl(api, tmp_path, "delete", "node", agent.node, "--volumes")
    assert node.stderr == f"error: node/{agent.node}: --volumes applies to projects only\n"
