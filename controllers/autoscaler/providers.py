"""Providers: who creates and deletes a group's machines. One small interface, two implementations.

* `ExecProvider` (`spec.provider.exec`): runs the group's `create` command once per node, `delete` once per node,
  and `list` (optional) to see which machines exist. Each command gets the node's name, group, labels, taints and
  extended resources in its environment (`CARA_NODE_*`, see `node_environment`), is killed after `timeout` and
  fails the call when it exits non-zero (the message carries the last line it wrote to stderr).
* `GrpcProvider` (`spec.provider.grpc`): calls a server of the `NodeProvider` service (`autoscaling.proto`),
  modelled on the cluster-autoscaler's external gRPC provider.

Guarantees: every call is idempotent per node name (the autoscaler chooses the names and asks again after a
restart; a provider asked twice for one name creates one machine); every failure is a `ProviderError` with a
one-line message, never a transport exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc

from caravanserai import v1
from caravanserai.api.v1 import autoscaling_pb2_grpc
from caravanserai.controllers.autoscaler.settings import DEFAULT_PROVIDER_TIMEOUT, duration_or
from caravanserai.controllers.scheduler.resources import CPU, MEMORY
from caravanserai.errors import CaravanseraiError
from caravanserai.text.durations import format_duration

RUNNING, CREATING, DELETING = "Running", "Creating", "Deleting"
R = TypeVar("R")


class ProviderError(CaravanseraiError):
    """A provider could not do what it was asked (the message says why, in one line)."""


@dataclass(frozen=True, slots=True)
class ProviderNode:
    """A machine as its provider sees it."""

    name: str
    state: str = RUNNING
    error: str = ""


class NodeProvider(Protocol):
    """Creates and deletes the machines of one group (see the module docstring)."""

    async def increase(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        """Create the named nodes (each registers under its name with the template's labels)."""

    async def delete(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        """Delete the named nodes (drained already)."""

    async def list(self, group: v1.NodeGroup) -> list[ProviderNode] | None:
        """The group's machines, or None when this provider cannot list them."""


def node_environment(group: v1.NodeGroup, node: str) -> dict[str, str]:
    """The `CARA_NODE_*` variables of an exec command about `node` of `group` (plus the group's `env`)."""
    template = group.spec.template
    labels = {**template.labels, v1.LABEL_NODE_GROUP: group.metadata.name}
    resources = template.capacity or template.allocatable
    extended = {k: v for k, v in sorted(resources.items()) if k not in (CPU, MEMORY)}
    return {
        **group.spec.provider.exec.env,
        "CARA_NODE_NAME": node,
        "CARA_NODE_GROUP": group.metadata.name,
        "CARA_NODE_LABELS": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        "CARA_NODE_TAINTS": ",".join(f"{t.key}={t.value}:{t.effect}" for t in template.taints),
        "CARA_NODE_RESOURCES": ",".join(f"{k}={v}" for k, v in extended.items()),
    }


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


async def run_command(argv: Sequence[str], env: Mapping[str, str], *, timeout: float, what: str) -> str:
    """Run `argv` with `env` added to ours; its stdout. ProviderError when it cannot start, exits non-zero or runs
    longer than `timeout` seconds (it is killed with its process group then)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env={**os.environ, **env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills what it started too
        )
    except OSError as exc:
        raise ProviderError(f"{what} command {argv[0]!r} could not start: {exc.strerror or exc}") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        await _kill_group(proc)
        raise ProviderError(f"{what} command timed out after {format_duration(timeout)}") from None
    except asyncio.CancelledError:
        await _kill_group(proc)
        raise
    if proc.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        said = f": {lines[-1]}" if lines else ""
        raise ProviderError(f"{what} command exited with status {proc.returncode}{said}")
    return out.decode(errors="replace")


class ExecProvider:
    """Commands run on this machine (module docstring)."""

    async def increase(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        spec = group.spec.provider.exec
        await asyncio.gather(*(self._run(group, spec.create, node, "create") for node in nodes))

    async def delete(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        spec = group.spec.provider.exec
        await asyncio.gather(*(self._run(group, spec.delete, node, "delete") for node in nodes))

    async def list(self, group: v1.NodeGroup) -> list[ProviderNode] | None:
        spec = group.spec.provider.exec
        if not spec.list:
            return None
        out = await self._run(group, spec.list, "", "list")
        return [ProviderNode(line.strip()) for line in out.splitlines() if line.strip()]

    @staticmethod
    async def _run(group: v1.NodeGroup, argv: Sequence[str], node: str, what: str) -> str:
        timeout = duration_or(group.spec.provider.exec.timeout, DEFAULT_PROVIDER_TIMEOUT)
        env = node_environment(group, node)
        return await run_command(list(argv), env, timeout=timeout, what=f"{what}{f' {node}' if node else ''}:")


class GrpcProvider:
    """A `NodeProvider` gRPC server (module docstring). One channel per address, kept for the process's life."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, group: v1.NodeGroup) -> autoscaling_pb2_grpc.NodeProviderAsyncStub:
        address = group.spec.provider.grpc.address
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = grpc.aio.insecure_channel(address)
        return autoscaling_pb2_grpc.NodeProviderStub(channel)

    @staticmethod
    def _timeout(group: v1.NodeGroup) -> float:
        return duration_or(group.spec.provider.grpc.timeout, DEFAULT_PROVIDER_TIMEOUT)

    async def increase(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        request = v1.IncreaseSizeRequest(group=group.metadata.name, nodes=nodes, template=group.spec.template)
        await self._call("IncreaseSize", self._stub(group).IncreaseSize(request, timeout=self._timeout(group)))

    async def delete(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        request = v1.DeleteNodesRequest(group=group.metadata.name, nodes=nodes)
        await self._call("DeleteNodes", self._stub(group).DeleteNodes(request, timeout=self._timeout(group)))

    async def list(self, group: v1.NodeGroup) -> list[ProviderNode] | None:
        request = v1.ListNodesRequest(group=group.metadata.name)
        reply = await self._call("ListNodes", self._stub(group).ListNodes(request, timeout=self._timeout(group)))
        return [ProviderNode(n.name, n.state or RUNNING, n.error_message) for n in reply.nodes]

    @staticmethod
    async def _call(what: str, call: Awaitable[R]) -> R:
        try:
            return await call
        except grpc.aio.AioRpcError as exc:
            raise ProviderError(f"provider {what}: {exc.code().name}: {exc.details()}") from exc

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()


class Providers:
    """The provider of each group, by its spec (`exec` or `grpc`)."""

    def __init__(self) -> None:
        self.exec = ExecProvider()
        self.grpc = GrpcProvider()

    def of(self, group: v1.NodeGroup) -> NodeProvider:
        return self.grpc if group.spec.provider.HasField("grpc") else self.exec


__all__ = [
    "CREATING",
    "DELETING",
    "ExecProvider",
    "GrpcProvider",
    "NodeProvider",
    "ProviderError",
    "ProviderNode",
    "Providers",
    "RUNNING",
    "node_environment",
    "run_command",
]
