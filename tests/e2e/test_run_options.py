"""The Compose keys of a service on real Docker: a project using every one runs, and each took effect (seen inside
the container and in `docker inspect`), including a HostPath bind mount of a temporary directory; a change of one
recreates that service only; an agent with --allowed-host-paths reports them and refuses a project outside them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, container_ids, docker, wait_phase

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

SLEEP = ["sh", "-c", "exec sleep 3600"]
CAP_NET_ADMIN = 12


def inspect(project_name: str, service: str, node: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = json.loads(docker("inspect", naming.container_name(project_name, service, node)))
    return found[0]


def inside(project_name: str, service: str, node: str, script: str) -> str:
    return docker("exec", naming.container_name(project_name, service, node), "sh", "-c", script)


def every_option(p: v1.Project, image: str, site: Path) -> None:
    p.spec.volumes.add(name="site", type=v1.VOLUME_HOST_PATH, host_path=str(site))
    web = p.spec.services.add(name="web", image=image, command=SLEEP, user="1000:1000")
    web.cap_add.append("net_admin")
    web.cap_drop.append("CHOWN")
    web.devices.add(host_path="/dev/zero", container_path="/dev/zero2", permissions="rw")
    web.tmpfs.add(mount_path="/scratch", size="8Mi", mode=0o1777)
    web.shm_size = "16Mi"
    web.stop_signal = "SIGQUIT"
    web.stop_grace_period = "7s"
    web.init = True
    web.extra_hosts.add(hostname="db.internal", ip="10.1.2.3")
    web.labels["com.example.team"] = "web"
    web.ulimits.add(name="nofile", soft=1024, hard=2048)
    web.sysctls["net.core.somaxconn"] = "1000"
    web.logging.driver = "json-file"
    web.logging.options["max-size"] = "1m"
    web.volume_mounts.add(name="site", mount_path="/site", read_only=True)
    # privileged is left to the unit tests: an engine that runs inside a container may refuse it (runc cannot
    # apply every capability there)
    p.spec.services.add(name="hostnet", image=image, command=SLEEP, network_mode="host")


async def test_every_run_option_takes_effect_and_a_change_recreates_only_its_service(
    client: Client, start_agent: StartAgent, image: str, tmp_path: Path
) -> None:
    agent = await start_agent()
    node = agent.node
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("hello from the host")
    p = project("opts")
    del p.spec.services[:]
    every_option(p, image, site)
    await client.projects.create(p)
    await bind(client, "opts", node)
    await wait_phase(client, "opts", v1.RUNNING, timeout=60)

    web = inspect("opts", "web", node)
    config, host = web["Config"], web["HostConfig"]
    assert inside("opts", "web", node, "id -u; id -g").split() == ["1000", "1000"]
    cap_bnd = int(inside("opts", "web", node, "grep CapBnd /proc/self/status").split()[1], 16)
    assert cap_bnd & (1 << CAP_NET_ADMIN) and not cap_bnd & 1  # NET_ADMIN added, CHOWN (bit 0) dropped
    assert host["Devices"] == [{"PathOnHost": "/dev/zero", "PathInContainer": "/dev/zero2", "CgroupPermissions": "rw"}]
    assert inside("opts", "web", node, "head -c 3 /dev/zero2 | od -An -tx1").split() == ["00", "00", "00"]
    mounts = inside("opts", "web", node, "cat /proc/mounts")
    assert any(line.startswith("tmpfs /scratch tmpfs") and "size=8192k" in line for line in mounts.splitlines())
    assert any(" /dev/shm " in line and "size=16384k" in line for line in mounts.splitlines())
    assert (config["StopSignal"], config["StopTimeout"], config["Labels"][naming.LABEL_STOP_TIMEOUT]) == (
        "SIGQUIT",
        7,
        "7",
    )
    assert host["Init"] is True and "init" in inside("opts", "web", node, "cat /proc/1/cmdline")
    assert "10.1.2.3\tdb.internal" in inside("opts", "web", node, "cat /etc/hosts")
    assert config["Labels"]["com.example.team"] == "web" and config["Labels"][naming.LABEL_SERVICE] == "web"
    assert inside("opts", "web", node, "ulimit -n; ulimit -Hn").split() == ["1024", "2048"]
    assert inside("opts", "web", node, "cat /proc/sys/net/core/somaxconn") == "1000"
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-size": "1m"}}
    assert inside("opts", "web", node, "cat /site/index.html") == "hello from the host"
    assert host["Binds"] == [f"{site}:/site:ro"]
    hostnet = inspect("opts", "hostnet", node)
    assert hostnet["HostConfig"]["NetworkMode"] == "host"
    assert list(hostnet["NetworkSettings"]["Networks"]) == ["host"]

    before = container_ids(f"{NODE_LABEL}={node}")
    current = await client.projects.get("opts")
    current.spec.services[0].ulimits[0].soft = 512
    await client.projects.update(current)

    async def web_alone_recreated() -> bool:
        now = container_ids(f"{NODE_LABEL}={node}")
        changed = {name for name in now if now[name] != before.get(name)}
        running = (await client.projects.get("opts")).status.phase == v1.RUNNING
        return running and changed == {naming.container_name("opts", "web", node)}

    await wait_for(web_alone_recreated, timeout=60, message="web recreated, hostnet kept")
    assert inside("opts", "web", node, "ulimit -n") == "512"


async def test_an_agent_with_allowed_host_paths_reports_them_and_refuses_a_project_outside_them(
    client: Client, start_agent: StartAgent, image: str, tmp_path: Path
) -> None:
    allowed = tmp_path / "allowed"
    agent = await start_agent(allowed_host_paths=(str(allowed),))
    node = await client.nodes.get(agent.node)
    assert list(node.status.allowed_host_paths) == [str(allowed)]
    p = project("outside", image=image)
    p.spec.volumes.add(name="etc", type=v1.VOLUME_HOST_PATH, host_path=str(tmp_path / "elsewhere"))
    p.spec.services[0].volume_mounts.add(name="etc", mount_path="/etc/outside")
    await client.projects.create(p)
    await bind(client, "outside", agent.node)
    failed = await wait_phase(client, "outside", v1.FAILED, timeout=30)
    phase = next(c for c in failed.status.conditions if c.type == v1.CONDITION_PHASE)
    assert phase.reason == "HostPathNotAllowed"
    assert phase.message == (
        f"volume etc: host path {tmp_path / 'elsewhere'} is not allowed on node {agent.node}"
        f" (its agent allows only {allowed}: --allowed-host-paths)"
    )
    assert container_ids(f"{NODE_LABEL}={agent.node}") == {}  # nothing was created
