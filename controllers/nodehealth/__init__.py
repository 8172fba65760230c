"""Node health: Lease age → node Ready/NotReady; NotReadyAt grace; projects off dead nodes (DESIGN §4).

* `policy`: the pure decisions (readiness, per-project steps, brakes), tested with tables;
* `conditions`: the statuses written, as pure functions;
* `reconciler`: the controller; `app`: its wiring; `__main__`: `cara-node-health`.
"""
