"""Secrets and Configs on real Docker: environment variables and read-only files, a change restarting exactly
the services that read what changed, and the grant variables read back inside a container."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, container_ids, docker, wait_phase

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

SLEEP = ["sh", "-c", "exec sleep 3600"]


def service(p: v1.Project, name: str, image: str) -> v1.Service:
    svc = p.spec.services.add(name=name, image=image)
    svc.command.extend(SLEEP)
    return svc


def in_container(project_name: str, svc: str, node: str, script: str, *, check: bool = True) -> str:
    return docker("exec", naming.container_name(project_name, svc, node), "sh", "-c", script, check=check)


async def test_env_and_files_and_a_change_restarts_exactly_its_readers(
    client: Client, start_agent: StartAgent, image: str, tmp_path: Path
) -> None:
    agent = await start_agent(data_dir=str(tmp_path / "data"))
    creds = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name="creds")))
    creds.spec.data.update({"password": b"pw-1", "token": b"tok-1"})
    await client.secrets.create(creds)
    await client.configs.create(
        v1.Config(metadata=v1.ObjectMeta(name="settings"), spec=v1.ConfigSpec(data={"MODE": "fast"}))
    )
    p = project("app")
    del p.spec.services[:]
    env_user = service(p, "env-user", image)  # reads creds/password and every key of settings
    env_user.env.add(name="PASSWORD", value_from=v1.KeyRef(secret="creds", key="password"))
    env_user.env_from.add(config="settings")
    file_user = service(p, "file-user", image)  # reads every key of creds, as files
    file_user.volume_mounts.add(name="creds", mount_path="/etc/creds")
    service(p, "bystander", image)  # reads nothing
    p.spec.volumes.add(name="creds", type=v1.VOLUME_SECRET, secret="creds", mode=0o400)
    await client.projects.create(p)
    await bind(client, "app", agent.node)
    await wait_phase(client, "app", v1.RUNNING, timeout=30)
    node = agent.node
    assert in_container("app", "env-user", node, 'echo "$PASSWORD $MODE"') == "pw-1 fast"
    assert in_container("app", "file-user", node, "cat /etc/creds/password /etc/creds/token") == "pw-1tok-1"
    assert in_container("app", "file-user", node, "stat -c %a /etc/creds/token") == "400"
    assert "Read-only" in in_container("app", "file-user", node, "{ echo x > /etc/creds/token; } 2>&1", check=False)
    before = container_ids(f"{NODE_LABEL}={node}")

    async def replaced(*services: str) -> dict[str, str] | None:
        now = container_ids(f"{NODE_LABEL}={node}")
        names = {naming.container_name("app", s, node) for s in services}
        changed = {n for n in now if now[n] != before.get(n)}
        return now if changed == names and (await client.projects.get("app")).status.phase == v1.RUNNING else None

    # A key only the file user reads: the file user alone is recreated.
    current = await client.secrets.get("creds")
    current.spec.data["token"] = b"tok-2"
    await client.secrets.update(current)
    before = await wait_for(lambda: replaced("file-user"), timeout=30, message="file-user recreated")
    await wait_for(
        lambda: in_container("app", "file-user", node, "cat /etc/creds/token", check=False) == "tok-2", timeout=10
    )
    # The key both read: both are recreated, the bystander never.
    current = await client.secrets.get("creds")
    current.spec.data["password"] = b"pw-2"
    await client.secrets.update(current)
    before = await wait_for(lambda: replaced("env-user", "file-user"), timeout=30, message="both readers recreated")
    await wait_for(lambda: in_container("app", "env-user", node, 'echo "$PASSWORD"', check=False) == "pw-2", timeout=10)
    # A metadata-only write (what re-encryption does) restarts nobody.
    current = await client.secrets.get("creds")
    current.metadata.annotations["caravanserai.io/rewritten"] = "1"
    await client.secrets.update(current)
    settings = await client.configs.get("settings")
    settings.spec.data["MODE"] = "slow"
    await client.configs.update(settings)
    await wait_for(lambda: replaced("env-user"), timeout=30, message="the config reader recreated")
    assert in_container("app", "env-user", node, 'echo "$MODE"') == "slow"
    await client.projects.delete("app")
    await wait_phase(client, "app", v1.TERMINATED, timeout=30)
    assert not (tmp_path / "data" / "app").exists()  # the files went with the project


async def test_a_service_waits_for_a_missing_secret(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    p = project("late")
    del p.spec.services[:]
    svc = service(p, "needs", image)
    svc.env.add(name="KEY", value_from=v1.KeyRef(secret="late-secret", key="key"))
    service(p, "free", image)
    await client.projects.create(p)
    await bind(client, "late", agent.node)

    async def waiting() -> str:
        current = await client.projects.get("late")
        return next((s.waiting_for for s in current.status.services if s.name == "needs" and s.state == "waiting"), "")

    assert await wait_for(waiting, timeout=30) == 'secret "late-secret" (not found)'
    late = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name="late-secret")))
    late.spec.data["key"] = b"here"
    await client.secrets.create(late)  # the agent hears of it and starts the service
    await wait_for(lambda: in_container("late", "needs", agent.node, 'echo "$KEY"', check=False) == "here", timeout=30)


async def test_the_container_learns_what_it_was_granted(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent(resources={"example.com/fpga": 2})
    p = project("granted")
    del p.spec.services[:]
    svc = service(p, "worker", image)
    svc.resources.requests.update({"cpu": "250m", "memory": "64Mi"})
    svc.resources.limits.update({"cpu": "500m", "memory": "128Mi", "example.com/fpga": "1"})
    await client.projects.create(p)
    await bind(client, "granted", agent.node)
    await wait_phase(client, "granted", v1.RUNNING, timeout=30)
    env = dict(
        line.split("=", 1)
        for line in in_container("granted", "worker", agent.node, "env").splitlines()
        if line.startswith("CARA_")
    )
    assert env == {
        "CARA_NODE_NAME": agent.node,
        "CARA_NAMESPACE": "default",
        "CARA_PROJECT": "granted",
        "CARA_SERVICE": "worker",
        "CARA_CPU_REQUEST": "250",
        "CARA_CPU_LIMIT": "500",
        "CARA_MEMORY_REQUEST": str(64 * 2**20),
        "CARA_MEMORY_LIMIT": str(128 * 2**20),
        "CARA_RESOURCE_EXAMPLE_COM_FPGA": "1",  # the limit, requested (no request given)
    }


def _host_read_as_nobody(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", path],
        capture_output=True,
        text=True,
        check=False,
    )


async def test_secret_files_belong_to_the_service_user_and_no_other_local_user(
    client: Client, start_agent: StartAgent, image: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    agent = await start_agent(data_dir=str(data_dir))
    secret = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name="private")))
    secret.spec.data["token"] = b"s3cret"
    await client.secrets.create(secret)
    p = project("owned")
    del p.spec.services[:]
    reader = service(p, "reader", image)
    reader.user = "1234:1234"
    reader.volume_mounts.add(name="private", mount_path="/etc/private")
    p.spec.volumes.add(name="private", type=v1.VOLUME_SECRET, secret="private")  # no mode: the default
    await client.projects.create(p)
    await bind(client, "owned", agent.node)
    await wait_phase(client, "owned", v1.RUNNING, timeout=30)
    node = agent.node
    assert in_container("owned", "reader", node, "id -u; cat /etc/private/token").split() == ["1234", "s3cret"]
    assert in_container("owned", "reader", node, "stat -c '%a %u:%g' /etc/private/token") == "400 1234:1234"
    on_host = [f for f in data_dir.rglob("token") if f.is_file()]
    assert len(on_host) == 1
    assert {oct(d.stat().st_mode & 0o777) for d in on_host[0].parents if d.is_relative_to(data_dir)} == {"0o700"}
    refused = _host_read_as_nobody(str(on_host[0]))
    assert refused.returncode != 0 and "s3cret" not in refused.stdout, refused
