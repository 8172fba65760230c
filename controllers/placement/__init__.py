"""Placement upkeep: projects that must move, and finished projects whose spec changed (DESIGN §6).

* `policy`: the pure decision per project (NoExecute taints with tolerationSeconds, a spec change that makes the
  node ineligible, a Failed/Succeeded project with a new generation), tested with tables;
* `reconciler`: the controller (acts on the live version); `app`: its wiring in `cara-controller-manager`.
"""
