"""The Project kind on the server: its strategy and its rules, one module each.

* `strategy`: defaults, the spec/status split, the phase table on UpdateStatus, the delete plan, node access;
* `rules`: the spec and status rules (services, ports, volumes, resources, ingress, tolerations);
* `servicerules`: how services relate and are checked (`dependsOn`, `healthcheck`, tolerationSeconds);
* `datarules`: where a project names Secrets and Configs, image pull settings, extended resources;
* `backuprules`: a volume's backups (`backup`), what a node without its data does (`restore`), `restoreRequest`.
"""

from __future__ import annotations

from caravanserai.apiserver.kinds.project.strategy import (
    KIND,
    STRATEGY,
    ProjectStrategy,
    default_requests,
    finishes_move,
    node_sees,
)

__all__ = ["KIND", "STRATEGY", "ProjectStrategy", "default_requests", "finishes_move", "node_sees"]
