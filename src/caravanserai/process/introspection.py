"""gRPC introspection every Caravanserai server offers: the standard health service and server reflection.

    health = await serve_introspection(server, ["caravanserai.v1.Resources"])
    await health.set("caravanserai.v1.Resources", SERVING)   # once it really serves

* **Health** (`grpc.health.v1.Health`): the overall status ("") and one per named service start NOT_SERVING; the
  server sets them SERVING when ready, and `enter_graceful_shutdown()` turns them NOT_SERVING on the way down.
* **Reflection** (`grpc.reflection.v1alpha.ServerReflection`): lists the named services plus health and reflection
  themselves, with their descriptors, so generic tools (`grpcurl -plaintext HOST:PORT list`, Postman) can
  explore the API. The descriptors come from the generated code already imported by the process.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

HEALTH_SERVICE = health.SERVICE_NAME
REFLECTION_SERVICE = reflection.SERVICE_NAME


async def serve_introspection(server: grpc.aio.Server, services: Sequence[str]) -> health.aio.HealthServicer:
    """Add health and reflection for `services` to `server` (before it starts); returns the health servicer,
    with every service NOT_SERVING until the caller says otherwise."""
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for name in ("", *services):
        await servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    reflection.enable_server_reflection([*services, HEALTH_SERVICE, REFLECTION_SERVICE], server)
    return servicer


async def set_serving(servicer: health.aio.HealthServicer, services: Sequence[str]) -> None:
    """Mark the server ("") and `services` SERVING."""
    for name in ("", *services):
        await servicer.set(name, health_pb2.HealthCheckResponse.SERVING)


__all__ = ["HEALTH_SERVICE", "REFLECTION_SERVICE", "serve_introspection", "set_serving"]
