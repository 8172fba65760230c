"""Garbage collection: Terminated projects deleted shortly after, expired projects deleted, projects on deleted
nodes finished or returned to Pending (DESIGN §4).

* `policy`: the pure decision per project; `reconciler`: the controller (live reads before acting);
  `app`: its wiring; `__main__`: `cara-gc`.
"""
