"""Expanders: which group a scale-up grows when several could place Pending projects (the cluster-autoscaler's
names and meanings).

* `least-waste` (default): the option leaving the smallest share of the new nodes' cpu and memory unused; ties
  go to the option placing more projects, then to the group name.
* `priority`: the group with the highest `spec.priority`; ties as least-waste.
* `random`: any option, drawn from the injected random source.

Each is a pure function of the options (and the random source); the reconciler calls `choose`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from caravanserai.controllers.autoscaler.simulation import GroupOption

LEAST_WASTE = "least-waste"
PRIORITY = "priority"
RANDOM = "random"
EXPANDERS = (LEAST_WASTE, PRIORITY, RANDOM)


def _least_waste_key(option: GroupOption) -> tuple[float, int, str]:
    return (option.waste, -len(option.projects), option.group)


def least_waste(options: Sequence[GroupOption], rng: random.Random) -> GroupOption:
    return min(options, key=_least_waste_key)


def by_priority(options: Sequence[GroupOption], rng: random.Random) -> GroupOption:
    return min(options, key=lambda o: (-o.priority, *_least_waste_key(o)))


def at_random(options: Sequence[GroupOption], rng: random.Random) -> GroupOption:
    return rng.choice(sorted(options, key=lambda o: o.group))


Expander = Callable[[Sequence[GroupOption], random.Random], GroupOption]

BY_NAME: dict[str, Expander] = {LEAST_WASTE: least_waste, PRIORITY: by_priority, RANDOM: at_random}


def choose(name: str, options: Sequence[GroupOption], rng: random.Random) -> GroupOption | None:
    """The option expander `name` picks, None when there is none."""
    return BY_NAME[name](options, rng) if options else None


__all__ = [
    "BY_NAME",
    "EXPANDERS",
    "Expander",
    "LEAST_WASTE",
    "PRIORITY",
    "RANDOM",
    "at_random",
    "by_priority",
    "choose",
    "least_waste",
]
