"""The example ProjectSet kind (examples/projectset/projectset.proto) for tests of custom kinds.

`projectset_messages()` compiles the example's .proto once per process (grpcio-tools, the `proto` extra) into the
default descriptor pool; `define_projectset(client)` defines the kind on a server.
"""

from __future__ import annotations

import functools
import pathlib
import types
from typing import Any

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.customkinds.protoc import load_proto
from caravanserai.testing.docker import DEFAULT_IMAGE

GROUP = "example.com"
PRINTER_COLUMNS = (("REPLICAS", ".spec.replicas"), ("READY", ".status.readyReplicas"))


def example_proto() -> pathlib.Path:
    """Where the example's .proto is: in the source checkout that holds this support package."""
    here = pathlib.Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "examples" / "projectset" / "projectset.proto"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("examples/projectset/projectset.proto not found (tests need a source checkout)")


@functools.cache
def projectset_messages() -> types.SimpleNamespace:
    """ProjectSet, ProjectSetSpec, ProjectSetStatus, ProjectTemplate (and the UpdatePolicy numbers) as classes."""
    return load_proto(str(example_proto()))


async def define_projectset(client: Client, **kwargs: Any) -> v1.ResourceDefinition:
    """Define projectsets.example.com (short name `ps`, printer columns REPLICAS and READY) on `client`'s server."""
    m = projectset_messages()
    options: dict[str, Any] = {"group": GROUP, "short_names": ("ps",), "printer_columns": PRINTER_COLUMNS, **kwargs}
    return await client.define(m.ProjectSet, spec=m.ProjectSetSpec, status=m.ProjectSetStatus, **options)


def projectset(
    name: str, *, replicas: int = 1, image: str = DEFAULT_IMAGE, labels: dict[str, str] | None = None
) -> Any:
    """A ProjectSet object: `replicas` projects of one service running `image` (`sleep 3600`), selected by
    `set=<name>`."""
    m = projectset_messages()
    obj = m.ProjectSet()
    obj.metadata.name = name
    obj.metadata.labels.update(labels or {})
    obj.spec.replicas = replicas
    obj.spec.selector["set"] = name
    service = obj.spec.template.spec.services.add()
    service.name = "main"
    service.image = image
    service.command.extend(["sleep", "3600"])
    return obj


__all__ = ["GROUP", "PRINTER_COLUMNS", "define_projectset", "example_proto", "projectset", "projectset_messages"]
