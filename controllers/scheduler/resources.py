"""Resource amounts as the scheduler counts them: plain integers per resource name.

* `cpu` is counted in millicores ("500m" → 500, "2" → 2000), every other resource (`memory`, `disk`, custom counts
  such as `gpu`) as a whole number rounded up ("512Mi" → 536870912, "0.5" → 1), so sums are exact.
* A project's requests are the sum of its services' `resources.requests`; a resource a service does not name
  counts as 0 for it. Limits are not requests (a service without requests asks for nothing).
* Quantities the apiserver accepted are valid; an unparsable one (written around validation) is treated as
  larger than any node, so the project is reported infeasible instead of being placed on a guess.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from caravanserai import v1
from caravanserai.text.quantity import cpu_millis, to_int

Resources = dict[str, int]
"""Amounts by resource name: cpu in millicores, everything else in whole units (bytes, counts)."""

CPU = "cpu"
MEMORY = "memory"
UNPARSABLE = 2**63
"""The amount an invalid quantity stands for: more than any node has."""


@functools.lru_cache(maxsize=4096)
def amount(resource: str, quantity: str) -> int:
    """The integer amount of `quantity` for `resource` (millicores for cpu); the few distinct quantities a
    cluster's projects use are parsed once."""
    try:
        return cpu_millis(quantity) if resource == CPU else to_int(quantity)
    except ValueError:
        return UNPARSABLE


def parse_resources(quantities: Mapping[str, str]) -> Resources:
    """A resource map of quantities ({"cpu": "500m"}) as integer amounts ({"cpu": 500})."""
    return {name: amount(name, text) for name, text in quantities.items()}


def project_requests(project: v1.Project) -> Resources:
    """The sum of the requests of every service of `project`; resources requested as 0 are left out."""
    total: Resources = {}
    for service in project.spec.services:
        for name, text in service.resources.requests.items():
            total[name] = total.get(name, 0) + amount(name, text)
    return {name: value for name, value in total.items() if value > 0}


def add_into(target: Resources, amounts: Mapping[str, int], sign: int = 1) -> None:
    """Add (`sign` 1) or subtract (`sign` -1) `amounts` into `target` in place; zero entries are dropped."""
    for name, value in amounts.items():
        updated = target.get(name, 0) + sign * value
        if updated:
            target[name] = updated
        else:
            target.pop(name, None)


def total(amounts: Iterable[Mapping[str, int]]) -> Resources:
    """The sum of several resource maps."""
    result: Resources = {}
    for item in amounts:
        add_into(result, item)
    return result


def ordered(names: Iterable[str]) -> list[str]:
    """Resource names in reporting order: cpu, memory, then the others alphabetically."""
    rank = {CPU: 0, MEMORY: 1}
    return sorted(names, key=lambda name: (rank.get(name, 2), name))


__all__ = [
    "CPU",
    "MEMORY",
    "Resources",
    "UNPARSABLE",
    "add_into",
    "amount",
    "ordered",
    "parse_resources",
    "project_requests",
    "total",
]
