"""The handler layer: per-kind create/update/resume/delete handlers, per-object timers and daemons, change
filters, automatic finalizers, retries without tracebacks and status writes with conflict retry, built on the
controller library's `Reconciler`, `Controller` and `Manager` (kopf's ergonomics, controller-runtime's guarantees).

    backups = Operator("backup", Backup, client)

    @backups.timer(interval=lambda backup: backup.spec.interval)
    async def run_backup(ctx: Context[Backup]) -> None:
        ...

    backups.setup(manager)
    await manager.run()

A kind that keeps dependents in line converges at every reconcile instead (a level handler), and `owns` the
dependents' kind so that a change of one reconciles its owner (its controller ownerReference):

    sets = Operator("webfarm", WebFarm, client)
    sets.owns(v1.Project)

    @sets.on_reconcile()
    async def converge(ctx: Context[WebFarm]) -> Requeue | None:
        ...

Modules: `operator` (the Operator and its reconcile), `context` (what a handler gets; `own`), `filters`,
`errors` (`Requeue`, `TemporaryError`, `PermanentError`), `handlers` (one call → an outcome), `daemons`,
`essence` (the last-handled state), `writes` (conflict-retried writes).
"""

from caravanserai.operator.context import Context, own
from caravanserai.operator.errors import PermanentError, Requeue, TemporaryError
from caravanserai.operator.filters import (
    Filter,
    annotations_changed,
    field_changed,
    generation_changed,
    labels_changed,
    when,
)
from caravanserai.operator.operator import Operator, OperatorController

__all__ = [
    "Context",
    "Filter",
    "Operator",
    "OperatorController",
    "PermanentError",
    "Requeue",
    "TemporaryError",
    "annotations_changed",
    "field_changed",
    "generation_changed",
    "labels_changed",
    "own",
    "when",
]
