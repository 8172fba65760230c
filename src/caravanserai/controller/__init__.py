"""The controller runtime: the reconcile contract, controllers with reconcile workers, the manager, leader election and
events.

    class TTLReconciler:
        async def reconcile(self, key: str) -> Result: ...

    manager = Manager(client, metrics_port=8080, leader_election=LeaderElectionConfig(name="ttl"))
    projects = manager.informers.informer(v1.Project)
    controller = Controller("ttl", TTLReconciler(...), max_concurrent_reconciles=4)
    controller.watch(projects)                             # enqueue_object: a change → the object's name
    controller.watch(nodes, enqueue_mapped(projects_for))  # a change → the keys a function returns
    manager.add(controller)
    await manager.run()

* `Reconciler` / `Result` / `TerminalError` (`reconcile`): raise → rate-limited retry; `requeue_after` →
  reconciled again later; `TerminalError` → logged, not retried; success → the key's failures are forgotten.
* `Controller` (`controller`): reconcile workers over a `caravanserai.workqueue.WorkQueue`; one key never twice at once.
* `Manager` (`manager`): informers, then (while leading) controllers, in one TaskGroup; `/healthz`, `/readyz`,
  `/metrics`; SIGTERM drains queues, releases the lease and stops informers.
* `LeaderElector` / `LeaderElectionConfig` (`leaderelection`): one active replica per lease.
* `EventRecorder` (`events`): v1.Events, aggregated when repeated.
"""

from caravanserai.controller.controller import Controller
from caravanserai.controller.handlers import HandlerFactory, enqueue_mapped, enqueue_matching, enqueue_object
from caravanserai.controller.leaderelection import LeaderElectionConfig, LeaderElector, default_identity
from caravanserai.controller.manager import Manager
from caravanserai.controller.metrics import ControllerMetrics
from caravanserai.controller.reconcile import Reconciler, Result, TerminalError
from caravanserai.controller.recorder import NORMAL, WARNING, EventRecorder

__all__ = [
    "Controller",
    "ControllerMetrics",
    "EventRecorder",
    "HandlerFactory",
    "LeaderElectionConfig",
    "LeaderElector",
    "Manager",
    "NORMAL",
    "Reconciler",
    "Result",
    "TerminalError",
    "WARNING",
    "default_identity",
    "enqueue_mapped",
    "enqueue_matching",
    "enqueue_object",
]
