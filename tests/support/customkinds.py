"""The example WebFarm kind (examples/webfarm/webfarm.proto) for tests of custom kinds.

`webfarm_messages()` compiles the example's .proto once per process (grpcio-tools, the `proto` extra) into the
default descriptor pool; `define_webfarm(client)` defines the kind on a server.
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
        candidate = parent / "examples" / "webfarm" / "webfarm.proto"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("examples/webfarm/webfarm.proto not found (tests need a source checkout)")


@functools.cache
def webfarm_messages() -> types.SimpleNamespace:
    """WebFarm, WebFarmSpec, WebFarmStatus, ProjectTemplate (and the UpdatePolicy numbers) as classes."""
    return load_proto(str(example_proto()))


async def define_webfarm(client: Client, **kwargs: Any) -> v1.ResourceDefinition:
    """Define webfarms.example.com (short name `wf`, printer columns REPLICAS and READY) on `client`'s server."""
    m = webfarm_messages()
    options: dict[str, Any] = {"group": GROUP, "short_names": ("wf",), "printer_columns": PRINTER_COLUMNS, **kwargs}
    return await client.define(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, **options)


def webfarm(name: str, *, replicas: int = 1, image: str = DEFAULT_IMAGE, labels: dict[str, str] | None = None) -> Any:
    """A WebFarm object: `replicas` projects of one service running `image` (`sleep 3600`), selected by
    `set=<name>`."""
    m = webfarm_messages()
    obj = m.WebFarm()
    obj.metadata.name = name
    obj.metadata.labels.update(labels or {})
    obj.spec.replicas = replicas
    obj.spec.selector["set"] = name
    service = obj.spec.template.spec.services.add()
    service.name = "main"
    service.image = image
    service.command.extend(["sleep", "3600"])
    return obj


__all__ = ["GROUP", "PRINTER_COLUMNS", "define_webfarm", "example_proto", "webfarm", "webfarm_messages"]
