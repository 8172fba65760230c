"""Garbage collection: Terminated projects deleted shortly after, expired projects deleted, projects on deleted
nodes finished or returned to Pending (DESIGN §4); dependents of deleted owners (metadata.ownerReferences, every
kind) deleted, with Kubernetes' Background, Foreground and Orphan propagation.

* `policy`: the pure decision per project; `reconciler`: the controller (live reads before acting);
  `ownergraph`: the ownership graph and the pure decisions per owner and dependent; `owners`: the owner collector;
  `app`: their wiring; `__main__`: `cara-gc`.
"""
