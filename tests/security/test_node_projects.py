"""Nodes see only what they need (issue #27 point 5): a node reads the projects it runs (bound to it, or handed over
from it), every Route and every Node; its lists and watches of projects carry nothing else. Real apiserver, mutual
TLS, real etcd."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from caravanserai import v1
from caravanserai.client import Change, Client
from caravanserai.errors import Forbidden, NotFound
from caravanserai.process.tls import TLSFiles
from caravanserai.project import lifecycle
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import node, project


async def _bound(admin: Client, name: str, to: str, *, spec_env: str = "") -> v1.Project:
    p = project(name)
    if spec_env:
        p.spec.services[0].env.add(name="SECRET_ISH", value=spec_env)
    created = await admin.projects.create(p)
    if not to:
        return created
    return await admin.projects.update_status(lifecycle.bind(created, to, now=time.time()))


async def _hand_off(admin: Client, p: v1.Project, to: str) -> v1.Project:
    """Move `p` off its node with a hand-off (its old node keeps serving), then bind it to `to`."""
    running = await admin.projects.update_status(lifecycle.run(p, reason="Started", message="", now=time.time()))
    now = time.time()
    moved = lifecycle.return_to_pending(running, reason="Drained", message="", now=now, handoff_until=now + 600)
    pending = await admin.projects.update_status(moved)
    return await admin.projects.update_status(lifecycle.bind(pending, to, now=time.time()))


async def test_a_node_reads_only_the_projects_it_runs(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with Client(secure_api.address, tls=tls_of("admin")) as admin:
        for name in ("n1", "n2"):
            await admin.nodes.create(node(name))
        await _bound(admin, "mine", "n1")
        await _bound(admin, "theirs", "n2", spec_env="only-for-n2")
        await _bound(admin, "unbound", "")
        leaving = await _hand_off(admin, await _bound(admin, "leaving", "n1"), "n2")
        assert (leaving.status.node_ref, leaving.status.previous_node_ref) == ("n2", "n1")
        async with Client(secure_api.address, tls=tls_of("node:n1"), retry_timeout=1) as n1:
            listed = await n1.projects.list()
            assert sorted(p.metadata.name for p in listed.items) == ["leaving", "mine"]
            assert (await n1.projects.get("mine")).status.node_ref == "n1"
            assert (await n1.projects.get("leaving")).status.previous_node_ref == "n1"  # its old copy still serves
            for other in ("theirs", "unbound"):
                with pytest.raises(Forbidden):
                    await n1.projects.get(other)
            with pytest.raises(NotFound):
                await n1.projects.get("never-made")
            assert len((await n1.nodes.list()).items) == 2  # Nodes hold no project: every node reads them
        async with Client(secure_api.address, tls=tls_of("node:n2"), retry_timeout=1) as n2:
            listed = await n2.projects.list()
            assert sorted(p.metadata.name for p in listed.items) == ["leaving", "theirs"]


async def test_a_nodes_watch_never_carries_another_nodes_project(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    seen: list[tuple[str, str]] = []
    async with (
        Client(secure_api.address, tls=tls_of("admin")) as admin,
        Client(secure_api.address, tls=tls_of("node:n1"), retry_timeout=1) as n1,
    ):
        for name in ("n1", "n2"):
            await admin.nodes.create(node(name))
        start = (await n1.projects.list()).resource_version

        async def watch() -> None:
            change: Change[v1.Project]
            async for change in n1.projects.watch(resource_version=start, allow_bookmarks=False):
                seen.append((change.type, change.object.metadata.name))
                names = [e.name for s in change.object.spec.services for e in s.env]
                assert "SECRET_ISH" not in names, f"node n1 was sent {change.object.metadata.name}'s spec"
                if change.object.metadata.name == "marker":
                    return

        watching = asyncio.create_task(watch())
        theirs = await _bound(admin, "theirs", "n2", spec_env="only-for-n2")
        theirs.spec.priority = 5
        await admin.projects.update(theirs)  # a spec change of a project bound elsewhere
        visiting = await _bound(admin, "visiting", "n1")
        gone = lifecycle.return_to_pending(visiting, reason="Drained", message="", now=time.time())
        pending = await admin.projects.update_status(gone)  # moved away without a hand-off: no longer n1's
        pending.spec.services[0].env.add(name="SECRET_ISH", value="after-it-left")
        pending = await admin.projects.update(pending)
        await admin.projects.update_status(lifecycle.bind(pending, "n2", now=time.time()))
        await _bound(admin, "marker", "n1")
        await asyncio.wait_for(watching, 10)
    assert [name for _, name in seen] == ["visiting", "visiting", "marker"], seen
    assert [kind for kind, _ in seen] == [v1.ADDED, v1.DELETED, v1.ADDED]
