"""The example TTL controller (examples/ttl_controller) against a real apiserver: in process on a fake clock,
and as its own process with leader election, stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import pathlib
import signal
import sys
import time
from types import ModuleType

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import NotFound
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.wait import wait_for

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "ttl_controller" / "ttl_controller.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ttl_controller_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_ttl(name: str, ttl: str | None) -> v1.Project:
    obj = project(name)
    if ttl is not None:
        obj.metadata.annotations["caravanserai.io/ttl"] = ttl
    return obj


async def exists(client: Client, name: str) -> bool:
    try:
        await client.projects.get(name)
    except NotFound:
        return False
    return True


async def events_for(client: Client, name: str) -> list[tuple[str, str]]:
    return sorted(
        (e.spec.type, e.spec.reason) for e in (await client.events.list()).items if e.spec.involved_object.name == name
    )


async def has_events(client: Client, name: str, expected: list[tuple[str, str]]) -> bool:
    """Events are recorded in the background (the recorder aggregates them), so tests wait for them."""
    return await events_for(client, name) == expected


async def test_expired_projects_are_deleted_and_the_rest_wait_for_their_time(client: Client) -> None:
    example = load_example()
    clock = FakeClock(start=time.time())  # the controller's clock; creation times come from the server's
    for name, ttl in (("keep", None), ("short", "30s"), ("long", "1h"), ("bad", "soon")):
        await client.projects.create(with_ttl(name, ttl))
    manager = example.build(client, clock=clock)
    controller = manager.controllers[0]
    run = asyncio.create_task(manager.run())
    try:
        await wait_for(lambda: controller.queue.delayed == 2, 5)  # short and long wait for their expiry
        await wait_for(lambda: has_events(client, "bad", [("Warning", "InvalidTTL")]), 5)

        clock.advance(31.0)
        await wait_for(lambda: _gone(client, "short"), 5)
        await wait_for(lambda: has_events(client, "short", [("Normal", "TTLExpired")]), 5)
        assert await exists(client, "long") and await exists(client, "keep") and await exists(client, "bad")

        clock.advance(3600.0)
        await wait_for(lambda: _gone(client, "long"), 5)
        assert await exists(client, "keep")
        assert controller.metrics.results["terminal"] == 1  # "bad" was given up, not retried
        assert controller.metrics.results["error"] == 0
    finally:
        manager.stop()
        await asyncio.wait_for(run, 10)


async def _gone(client: Client, name: str) -> bool:
    return not await exists(client, name)


async def test_the_example_runs_as_a_process_with_leader_election_and_stops_on_sigterm(
    client: Client, api: RunningApiServer
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--server",
        api.address,
        "--metrics-port",
        "0",
        "--leader-elect",
        "--lease-name",
        "ttl-example",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await client.projects.create(with_ttl("brief", "1s"))
        await wait_for(lambda: _gone(client, "brief"), 20)
        lease = await client.leases.get("ttl-example")
        assert lease.spec.holder_identity  # it led while deleting

        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
        assert process.returncode == 0, stderr.decode()[-2000:]
        released = await client.leases.get("ttl-example")
        assert released.spec.holder_identity == ""  # a clean stop hands the lease over at once
        assert await events_for(client, "brief") == [("Normal", "TTLExpired")]
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
