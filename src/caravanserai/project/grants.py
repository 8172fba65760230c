"""What a container is told about what it was granted: the grant variables in its environment.

(Not to be confused with the drain hand-off, `caravanserai.project.lifecycle`: a project leaving a node.)

Every container the agent creates gets (after the service's own `env`, so these win):

| variable | value |
|---|---|
| `CARA_NODE_NAME`, `CARA_NAMESPACE`, `CARA_PROJECT`, `CARA_SERVICE` | where it runs and what it is |
| `CARA_CPU_REQUEST`, `CARA_CPU_LIMIT` | millicores (`500m` → `500`, `2` → `2000`), when requested/limited |
| `CARA_MEMORY_REQUEST`, `CARA_MEMORY_LIMIT` | bytes (`1Gi` → `1073741824`), when requested/limited |
| `CARA_RESOURCE_<NAME>` | each granted extended resource's count (`nvidia.com/gpu` → `CARA_RESOURCE_NVIDIA_COM_GPU`) |

so that a scheduler inside the workload (Ray, Dask) can derive its logical capacity the way KubeRay does.
Pure: the same service always gives the same variables. Requests are read after the apiserver's defaulting (a
limit without a request requests its limit).
"""

from __future__ import annotations

import re

from caravanserai import meta, v1
from caravanserai.text.quantity import cpu_millis, to_int

STANDARD_RESOURCES = frozenset({"cpu", "memory"})
_NOT_ENV_CHAR = re.compile(r"[^A-Za-z0-9]")


def resource_env_name(resource: str) -> str:
    """`CARA_RESOURCE_<NAME>`: upper-cased, every non-alphanumeric as `_`."""
    return "CARA_RESOURCE_" + _NOT_ENV_CHAR.sub("_", resource).upper()


def extended(resources: v1.ResourceRequirements) -> dict[str, int]:
    """The extended resources (every name but cpu and memory) a service is granted, as whole counts: the request,
    or the limit when no request is given."""
    granted: dict[str, int] = {}
    for name in sorted((set(resources.requests) | set(resources.limits)) - STANDARD_RESOURCES):
        granted[name] = to_int(resources.requests.get(name) or resources.limits[name])
    return granted


def resource_variables(service: v1.Service) -> dict[str, str]:
    """The resource variables of the grant for `service` (without the names of node, project and service)."""
    resources = service.resources
    env: dict[str, str] = {}
    for which, values in (("REQUEST", resources.requests), ("LIMIT", resources.limits)):
        if "cpu" in values:
            env[f"CARA_CPU_{which}"] = str(cpu_millis(values["cpu"]))
        if "memory" in values:
            env[f"CARA_MEMORY_{which}"] = str(to_int(values["memory"]))
    for name, count in extended(resources).items():
        env[resource_env_name(name)] = str(count)
    return env


def environment(service: v1.Service, *, node: str, project: str, namespace: str) -> dict[str, str]:
    """Every grant variable for `service` of `project` (of `namespace`; "" means `default`) running on `node`."""
    names = {
        "CARA_NODE_NAME": node,
        "CARA_NAMESPACE": namespace or meta.DEFAULT_NAMESPACE,
        "CARA_PROJECT": project,
        "CARA_SERVICE": service.name,
    }
    return {**names, **resource_variables(service)}


__all__ = ["STANDARD_RESOURCES", "environment", "extended", "resource_env_name", "resource_variables"]
