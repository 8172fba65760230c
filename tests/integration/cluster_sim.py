"""Simulated nodes (Node + Lease objects, no agent, no Docker) and in-process controllers for controller tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock, SystemClock, timestamp
from caravanserai.controller import Manager
from caravanserai.errors import NotFound
from caravanserai.informer import Backoff, WatchOptions
from caravanserai.testing.builders import lease, node, node_status
from caravanserai.testing.manager import running

T = TypeVar("T")
FAST_INFORMERS = Backoff(initial=0.05, cap=0.3)


async def add_node(
    client: Client,
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[tuple[str, str, str]] = (),
    unschedulable: bool = False,
    renewed_at: float | None = None,
    state: str = v1.NODE_READY,
    clock: Clock | None = None,
) -> v1.Node:
    """Create a Ready-looking node with allocatable resources and, unless `renewed_at` is negative, its Lease
    renewed at `renewed_at` (default: now on `clock`)."""
    obj = node(name, labels=labels, unschedulable=unschedulable)
    for key, value, effect in taints:
        obj.spec.taints.add(key=key, value=value, effect=effect)
    created = await client.nodes.create(obj)
    node_status(created, cpu=cpu, memory=memory, state=state, extra=extra)
    stored = await client.nodes.update_status(created)
    if renewed_at is None or renewed_at >= 0:
        await renew(client, name, at=(clock or SystemClock()).now() if renewed_at is None else renewed_at)
    return stored


async def renew(client: Client, name: str, *, at: float) -> v1.Lease:
    """Renew (or create) the node's Lease with renew_time `at`."""
    try:
        current = await client.leases.get(name)
    except NotFound:
        fresh = lease(name)
        fresh.spec.renew_time.CopyFrom(timestamp(at))
        return await client.leases.create(fresh)
    updated = meta.copy(current)
    updated.spec.renew_time.CopyFrom(timestamp(at))
    return await client.leases.update(updated)


async def set_phase(client: Client, name: str, phase: str, *, node_ref: str | None = None) -> v1.Project:
    """Move a project to `phase` as an agent or scheduler would (UpdateStatus, compare-and-swap)."""
    current = await client.projects.get(name)
    updated = meta.copy(current)
    if node_ref is not None:
        updated.status.node_ref = node_ref
    meta.set_phase(updated, phase, reason=phase, message=f"test moved it to {phase}", now=SystemClock().now())
    return await client.projects.update_status(updated)


async def events_for(client: Client, name: str, reason: str | None = None) -> list[v1.Event]:
    """The events about the object `name` (optionally only those with `reason`)."""
    events = (await client.events.list()).items
    return [e for e in events if e.spec.involved_object.name == name and (reason is None or e.spec.reason == reason)]


def condition(obj: Any, type_: str) -> v1.Condition | None:
    return meta.get_condition(obj.status.conditions, type_)


@contextlib.asynccontextmanager
async def running_manager(
    client: Client, setup: Callable[[Manager], T], *, clock: Clock | None = None, **kwargs: Any
) -> AsyncIterator[tuple[Manager, T]]:
    """A Manager with what `setup(manager)` adds, running as a task until the block exits (then stopped)."""
    manager = Manager(
        client, clock=clock, watch_options=WatchOptions(backoff=FAST_INFORMERS), shutdown_timeout=5.0, **kwargs
    )
    parts = setup(manager)
    async with running(manager):
        yield manager, parts
