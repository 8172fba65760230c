"""Extended resources on the node (--resource, nvidia-smi), the GPU device request as Docker receives it, the
grant environment, registry credentials and pull progress."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from caravanserai import v1
from caravanserai.agent.docker import containers
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.docker.records import PullTally
from caravanserai.agent.host import extended
from caravanserai.agent.workload.pullreport import progress_text
from caravanserai.project import grants, registryauth


def fake_nvidia_smi(tmp_path: Path, gpus: int, *, code: int = 0) -> str:
    script = tmp_path / "nvidia-smi"
    lines = "".join(f"echo 'GPU {i}: NVIDIA Test (UUID: GPU-{i})'\n" for i in range(gpus))
    script.write_text(f'#!/bin/sh\n[ "$1" = --list-gpus ] || exit 9\n{lines}exit {code}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_gpus_are_detected_and_declared_counts_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    fake_nvidia_smi(tmp_path, 2)
    assert extended.nvidia_gpus() == 2
    assert extended.node_resources({"gpu": 4}) == {"nvidia.com/gpu": 2, "gpu": 4}
    assert extended.node_resources({"nvidia.com/gpu": 1}) == {"nvidia.com/gpu": 1}
    fake_nvidia_smi(tmp_path, 3, code=1)  # a failing nvidia-smi reports nothing
    assert extended.nvidia_gpus() == 0
    assert extended.nvidia_gpus("no-such-nvidia-smi") == 0


def test_resource_flags() -> None:
    assert extended.parse_resource("example.com/fpga=1") == ("example.com/fpga", 1)
    for text, message in (
        ("gpu", "expected NAME=COUNT"),
        ("gpu=1.5", "whole number"),
        ("cpu=2", "measured by the agent"),
        ("Bad Name=1", "invalid resource name"),
    ):
        with pytest.raises(ValueError, match=message):
            extended.parse_resource(text)


def test_automatic_labels() -> None:
    labels = extended.automatic_labels("Host-1")
    assert labels[extended.LABEL_HOSTNAME] == "host-1"
    assert labels[extended.LABEL_OS] == "linux"
    assert labels[extended.LABEL_ARCH] in ("amd64", "arm64")


def test_grant_environment() -> None:
    service = v1.Service(name="w")
    service.resources.requests.update({"cpu": "1.5", "memory": "1Gi", "nvidia.com/gpu": "2"})
    service.resources.limits.update({"cpu": "2", "example.com/fpga": "1"})
    assert grants.environment(service, node="n1", project="p", namespace="team-a") == {
        "CARA_NODE_NAME": "n1",
        "CARA_NAMESPACE": "team-a",
        "CARA_PROJECT": "p",
        "CARA_SERVICE": "w",
        "CARA_CPU_REQUEST": "1500",
        "CARA_MEMORY_REQUEST": str(2**30),
        "CARA_CPU_LIMIT": "2000",
        "CARA_RESOURCE_EXAMPLE_COM_FPGA": "1",
        "CARA_RESOURCE_NVIDIA_COM_GPU": "2",
    }


async def test_a_gpu_grant_reaches_docker_as_a_device_request() -> None:
    bodies: list[dict[str, Any]] = []

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"ApiVersion": "1.41", "Version": "test"})

    async def create(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        return web.json_response({"Id": "c0ffee", "Warnings": []}, status=201)

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/{api}/version", version)
    app.router.add_post("/{api}/containers/create", create)
    app.router.add_post("/containers/create", create)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        project = v1.Project(metadata=v1.ObjectMeta(name="ml", uid="u1", generation=1))
        service = project.spec.services.add(name="train", image="img")
        service.resources.limits["nvidia.com/gpu"] = "2"
        async with DockerRuntime.connect(f"tcp://127.0.0.1:{port}") as docker:
            await docker.create_container("cara_ml_train_n1", containers.container_config(project, service, node="n1"))
    finally:
        await runner.cleanup()
    assert bodies[0]["HostConfig"]["DeviceRequests"] == [{"Driver": "nvidia", "Count": 2, "Capabilities": [["gpu"]]}]
    assert "CARA_RESOURCE_NVIDIA_COM_GPU=2" in bodies[0]["Env"]


def test_registry_credentials() -> None:
    plain = {"registry": b"https://127.0.0.1:5000/", "username": b"u", "password": b"p"}
    assert registryauth.credentials(plain) == [registryauth.RegistryCredential("127.0.0.1:5000", "u", "p")]
    config = {"auths": {"reg.example.com": {"auth": base64.b64encode(b"me:pw").decode()}}}
    found = registryauth.credentials({".dockerconfigjson": json.dumps(config).encode()})
    assert found == [registryauth.RegistryCredential("reg.example.com", "me", "pw")]
    assert "pw" not in repr(found[0])
    assert registryauth.for_image("reg.example.com/team/app:1", found) == found[0]
    assert registryauth.for_image("nginx:1.27", found) is None
    assert registryauth.registry_of("localhost/app") == "localhost"
    assert registryauth.registry_of("team/app") == registryauth.DOCKER_HUB


def test_pull_progress_adds_up_layers() -> None:
    tally = PullTally()
    tally.add({"id": "a", "status": "Downloading", "progressDetail": {"current": 512, "total": 1024}})
    tally.add({"id": "b", "status": "Already exists"})
    progress = tally.add({"id": "c", "status": "Downloading", "progressDetail": {"current": 0, "total": 2048}})
    assert (progress.downloaded, progress.total, progress.layers, progress.done_layers) == (512, 3072, 3, 1)
    done = tally.add({"id": "a", "status": "Download complete"})
    assert done.downloaded == 1024 and progress_text("img", done) == "pulling image img: 1Ki of 3Ki (2/3 layers)"
    assert PullTally.error({"errorDetail": {"message": "denied"}}) == "denied"
