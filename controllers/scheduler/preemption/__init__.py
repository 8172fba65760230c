"""Preemption: a Pending project that fits nowhere evicts projects of lower priority to make room.

* `index`: the projects bound to each node with their priorities (what could be evicted there), kept from the
  informer;
* `whatif`: the one place a node is looked at with a set of projects taken off it (the filters' view);
* `victims`: the pure choice of the node and the smallest set of victims;
* `preemptor`: the scheduler's step: nominate the project, evict the victims, explain.
"""
