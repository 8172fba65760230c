"""Replicas made from a ProjectSet's template.

* A replica is named `<set>-<revision>-<five random characters>` (Kubernetes' pod names), lives in the set's
  namespace, carries the template's
  labels plus `caravanserai.io/template-hash: <revision>`, the template's spec, and a controller owner reference
  to the set (so the garbage collector deletes it with the set).
* **Spread by default**: a template without `topologySpreadConstraints` gets one on `caravanserai.io/hostname`
  with maxSkew 1, ScheduleAnyway, selecting the set's replicas by the set's selector — replicas land on
  different nodes when they can, and still run when there are fewer nodes than replicas. A template with its
  own constraints is used as written.
* `template_of` is the template of a revision the set recorded (a paused set creates replicas of its current
  revision), or the spec's template.
"""

from __future__ import annotations

import secrets

from caravanserai import meta, v1
from caravanserai.project.affinity import HOSTNAME_KEY, SCHEDULE_ANYWAY

SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH = 5


def random_suffix() -> str:
    """Five characters without vowels (no accidental words), as Kubernetes' generated names."""
    return "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(SUFFIX_LENGTH))


def template_of(projectset: v1.ProjectSet, revision: str) -> v1.ProjectTemplate:
    """The template of `revision`: a recorded one, or the spec's."""
    for recorded in projectset.status.revisions:
        if recorded.hash == revision:
            return recorded.template
    return projectset.spec.template


def default_spread(projectset: v1.ProjectSet) -> v1.TopologySpreadConstraint:
    """The spread constraint a template without one gets (module docstring)."""
    constraint = v1.TopologySpreadConstraint(max_skew=1, topology_key=HOSTNAME_KEY, when_unsatisfiable=SCHEDULE_ANYWAY)
    constraint.label_selector.CopyFrom(projectset.spec.selector)
    return constraint


def new_replica(projectset: v1.ProjectSet, revision: str, *, suffix: str) -> v1.Project:
    """A replica of `revision` (module docstring)."""
    template = template_of(projectset, revision)
    project = v1.Project()
    project.metadata.name = f"{projectset.metadata.name}-{revision}-{suffix}"
    project.metadata.namespace = projectset.metadata.namespace
    project.metadata.labels.update(template.labels)
    project.metadata.labels[v1.TEMPLATE_HASH_LABEL] = revision
    project.spec.CopyFrom(template.spec)
    if not project.spec.topology_spread_constraints:
        project.spec.topology_spread_constraints.append(default_spread(projectset))
    meta.set_owner(project, projectset, controller=True)
    return project


__all__ = ["SUFFIX_ALPHABET", "default_spread", "new_replica", "random_suffix", "template_of"]
