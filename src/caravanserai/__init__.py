"""Caravanserai: a container orchestrator for self-hosted fleets.

The library everyone imports: typed resources (`caravanserai.v1`), the async client (`caravanserai.client`),
errors (`caravanserai.errors`) and the controller runtime (informer, workqueue, controller).
"""

__all__: list[str] = []
