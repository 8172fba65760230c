"""Images from a private registry on real Docker: Debian's `docker-registry` (the Distribution registry) with
htpasswd basic auth on 127.0.0.1 (Docker treats loopback registries as insecure-allowed), the locally built test
image pushed there. The right RegistryAuth secret runs it; a wrong or missing one gives Failed with the registry's
message; `Always` picks up a re-pushed tag; `Never` refuses a missing image. The registry process is stopped and
its data removed however a test ends."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_harness import StartAgent, bind, docker, wait_phase

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.testing import free_port
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

USER, PASSWORD = "cara", "pull-secret-" + uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class Registry:
    address: str  # 127.0.0.1:<port>
    docker_config: str  # a private Docker CLI config holding the login (pushes only)

    def push(self, source: str, repo: str) -> str:
        """Push the local image `source` as `<address>/<repo>` and drop the local tag (so a pull is needed)."""
        target = f"{self.address}/{repo}"
        docker("tag", source, target)
        subprocess.run(
            ["docker", "--config", self.docker_config, "push", target], check=True, capture_output=True, timeout=120
        )
        docker("rmi", target)
        return target


@pytest.fixture
def registry(tmp_path: Path, image: str) -> Iterator[Registry]:
    if shutil.which("docker-registry") is None or shutil.which("htpasswd") is None:
        pytest.skip("needs docker-registry and htpasswd (apache2-utils); scripts/setup.sh installs them")
    root = tmp_path / "registry"
    (root / "data").mkdir(parents=True)
    htpasswd = subprocess.run(["htpasswd", "-Bbn", USER, PASSWORD], check=True, capture_output=True, text=True)
    (root / "htpasswd").write_text(htpasswd.stdout)  # the registry accepts bcrypt entries only
    port = free_port()
    (root / "config.yml").write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
        f"auth: {{htpasswd: {{realm: caravanserai-test, path: {root / 'htpasswd'}}}}}\n"
    )
    process = subprocess.Popen(
        ["docker-registry", "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the registry did not start") from None
                time.sleep(0.1)
        config = root / "docker-config"
        config.mkdir()
        subprocess.run(
            ["docker", "--config", str(config), "login", address, "-u", USER, "--password-stdin"],
            input=PASSWORD,
            text=True,
            check=True,
            capture_output=True,
            timeout=60,
        )
        yield Registry(address, str(config))
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        listed = docker("images", "--digests", "--format", "{{.Repository}} {{.Tag}} {{.Digest}}", check=False)
        for repository, tag, digest in (line.split() for line in listed.splitlines()):
            if repository.startswith(address + "/"):  # its tags, and the references a pull by digest left
                for reference in (f"{repository}:{tag}", f"{repository}@{digest}"):
                    if "<none>" not in reference:
                        docker("rmi", reference, check=False)
        shutil.rmtree(root, ignore_errors=True)


def pull_secret(name: str, registry: str, password: str) -> v1.Secret:
    secret = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name=name)))
    secret.spec.type = v1.SECRET_REGISTRY_AUTH
    secret.spec.data.update({"registry": registry.encode(), "username": USER.encode(), "password": password.encode()})
    return secret


def app(name: str, image: str, *, secret: str = "", policy: str = "") -> v1.Project:
    p = project(name, image=image)
    p.spec.services[0].image_pull_policy = policy
    if secret:
        p.spec.image_pull_secrets.append(secret)
    return p


async def messages(client: Client, name: str, reason: str) -> list[str]:
    return [
        e.spec.message
        for e in (await client.events.list()).items
        if e.spec.involved_object.name == name and e.spec.reason == reason
    ]


async def test_private_registry_pulls(client: Client, start_agent: StartAgent, image: str, registry: Registry) -> None:
    agent = await start_agent()
    target = registry.push(image, "cara/app:v1")
    await client.secrets.create(pull_secret("good", registry.address, PASSWORD))
    await client.secrets.create(pull_secret("bad", registry.address, "wrong-password"))

    created = await client.projects.create(app("right", target, secret="good"))
    seen: list[str] = []

    async def follow() -> None:  # every service status message the project goes through
        async for change in client.projects.watch(
            resource_version=created.metadata.resource_version, field_selector="metadata.name=right"
        ):
            seen.extend(s.message for s in change.object.status.services)

    watching = asyncio.create_task(follow())
    try:
        await bind(client, "right", agent.node)
        await wait_phase(client, "right", v1.RUNNING, timeout=60)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    assert any(m.startswith(f"pulling image {target}: ") for m in seen), seen  # progress while it ran
    pulled = await wait_for(lambda: messages(client, "right", "Pulled"), timeout=10)
    assert pulled[0].startswith(f"pulled image {target} for service svc0: ") and pulled[0].endswith("s")
    assert await messages(client, "right", "Pulling") == [f"pulling image {target} for service svc0"]

    docker("rmi", "-f", target)  # the pulled tag, so the next projects must pull again
    # The same credentials as a Docker config JSON (what `docker login` writes).
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    as_config = meta.with_type_meta(v1.Secret(metadata=v1.ObjectMeta(name="docker-config")))
    as_config.spec.type = v1.SECRET_REGISTRY_AUTH
    as_config.spec.data[".dockerconfigjson"] = json.dumps({"auths": {registry.address: {"auth": auth}}}).encode()
    await client.secrets.create(as_config)
    await client.projects.create(app("from-config", target, secret="docker-config"))
    await bind(client, "from-config", agent.node)
    await wait_phase(client, "from-config", v1.RUNNING, timeout=60)
    docker("rmi", "-f", target)
    for name, secret in (("wrong", "bad"), ("missing", "no-such-secret")):
        await client.projects.create(app(name, target, secret=secret))
        await bind(client, name, agent.node)
        failed = await wait_phase(client, name, v1.FAILED, timeout=60)
        phase = meta.get_condition(failed.status.conditions, v1.CONDITION_PHASE)
        assert phase is not None and phase.reason == "ImagePullFailed", phase
        refusals = ("unauthorized", "authentication required", "no basic auth credentials")  # the registry's words
        assert any(r in phase.message.lower() for r in refusals), (name, phase.message)

    await client.projects.create(app("never", f"{registry.address}/cara/absent:v1", policy=v1.PULL_NEVER))
    await bind(client, "never", agent.node)
    failed = await wait_phase(client, "never", v1.FAILED, timeout=30)
    phase = meta.get_condition(failed.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "ErrImageNeverPull"


async def test_always_picks_up_a_re_pushed_tag(
    client: Client, start_agent: StartAgent, image: str, registry: Registry
) -> None:
    agent = await start_agent()
    target = registry.push(image, "cara/moving:latest")
    await client.secrets.create(pull_secret("creds", registry.address, PASSWORD))
    await client.projects.create(app("moving", target, secret="creds", policy=v1.PULL_ALWAYS))
    await bind(client, "moving", agent.node)
    await wait_phase(client, "moving", v1.RUNNING, timeout=60)
    container = naming.container_name("moving", "svc0", agent.node)
    first = docker("inspect", "-f", "{{.Image}}", container)
    # A different image under the same tag: the test image plus a label (made locally, nothing pulled).
    scratch = f"cara-relabel-{uuid.uuid4().hex[:8]}"
    docker("create", "--name", scratch, image, "true")
    try:
        second_local = docker("commit", "--change", "LABEL pushed=second", scratch)
    finally:
        docker("rm", "-f", scratch, check=False)
    registry.push(second_local, "cara/moving:latest")
    docker("rmi", second_local, check=False)
    try:

        def restarted(current: v1.Project) -> bool:
            current.spec.services[0].restarted_at.GetCurrentTime()  # what `caractrl restart` does
            return True

        await modify(client.projects, "moving", restarted)

        async def moved_on() -> str:
            found = docker("inspect", "-f", "{{.Image}}", container, check=False)
            return found if found and found != first else ""

        second = await wait_for(moved_on, timeout=60, message="the container runs the re-pushed image")
        assert docker("inspect", "-f", '{{index .Config.Labels "pushed"}}', second) == "second"
        await wait_phase(client, "moving", v1.RUNNING, timeout=30)
        assert len(await messages(client, "moving", "Pulled")) >= 1
    finally:  # the re-pushed image, pulled back under the registry's tag, would outlive the test untagged
        await client.projects.delete("moving")
        await wait_phase(client, "moving", v1.TERMINATED, timeout=60)  # its container is removed
        docker("rmi", "-f", second_local, check=False)
