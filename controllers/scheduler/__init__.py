"""The scheduler: binds each Pending project to a node that can run it (DESIGN §4 "Scheduling").

* `filters` and `scores`: pure functions over `snapshot` records (tested with tables);
* `algorithm`: one decision over a capped, rotating sample of nodes, and the Unschedulable diagnosis;
* `cache`: per-node requested sums kept incrementally, and the assumed ledger;
* `active`: the priority ordering in front of the work queue, and retry backoff;
* `reconciler` and `handlers`: the controller; `app`: its wiring; `__main__`: `cara-scheduler`.
"""
