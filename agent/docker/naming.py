"""Deterministic Docker names and labels for a project's containers, network and volumes.

The agent keeps no state of its own: everything it needs to find again is encoded in names and labels, so a
restarted agent adopts what it already runs.

Guarantees:

* **No collisions.** Names join their parts with `_` (`cara_<project>_<service>_<node>`). Project, service and
  volume names are DNS labels and node names DNS subdomains, which cannot contain `_`, so the parts can be read
  back unambiguously: project `a-b` with service `c` is `cara_a-b_c_<node>`, project `a` with service `b-c` is
  `cara_a_b-c_<node>`.
* **One name space per node.** Every name ends with the node's name, so agents of different nodes sharing one
  Docker Engine never meet each other's objects under the names they use, even for the same project (one that
  moved while its former node was cut off).
* **Valid Docker names.** Every name matches Docker's `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
* **Namespaces** (the rule's home, shared with clients that show volume names: `caravanserai.project.nodenames`).
  A project is named by its key (`namespace/name`, see `caravanserai.meta.join_key`; a bare name
  means the `default` namespace). A `default` project's part of a name is its name, as before namespaces existed
  (so an upgraded agent adopts the containers it already runs); another namespace's project's part is
  `<namespace>_<project>` (`project_part`), one `_`-joined part more, so the two kinds of names never meet: two
  projects `web` of namespaces `team-a` and `team-b` are `cara_team-a_web_<service>_<node>` and
  `cara_team-b_web_<service>_<node>`, the `default` one `cara_web_<service>_<node>`.
* **Pool networks never pass for a project's.** The agent's spare project networks (`netpool`) are named
  `cara_pool.<token>_<node>`: a `.` cannot occur in a project name, so no pool network ever has the name of a
  project network. They carry `caravanserai.io/network-pool=true` and no project label: which project uses one is
  known only from the containers attached to it (see `netpool`).
* **Findable.** Every object carries `caravanserai.io/managed=true`, the project (`project_label`: the name for a
  `default` project, the key otherwise, so one label filter finds exactly one project's objects), its namespace
  (`caravanserai.io/namespace`; objects made before namespaces lack it and belong to `default`), the project's
  uid and the node whose agent made it; containers also carry the service, the spec generation and the spec
  hash; volumes carry their name and type (so ephemeral ones can be removed after the project record is gone),
  and Persistent ones the epoch of the copy of the data they hold (`caravanserai.io/epoch`, set at creation:
  labels never change, so a new copy is a new volume).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from caravanserai import meta, v1
from caravanserai.project.nodenames import PREFIX, SEPARATOR, project_part, volume_name
from caravanserai.project.nodenames import check_part as _check_part  # one rule for every part of a name

LABEL_DOMAIN = "caravanserai.io/"
LABEL_MANAGED = LABEL_DOMAIN + "managed"
LABEL_NODE = LABEL_DOMAIN + "node"
LABEL_PROJECT = LABEL_DOMAIN + "project"
LABEL_NAMESPACE = LABEL_DOMAIN + "namespace"
LABEL_PROJECT_UID = LABEL_DOMAIN + "project-uid"
LABEL_SERVICE = LABEL_DOMAIN + "service"
LABEL_GENERATION = LABEL_DOMAIN + "generation"
LABEL_SPEC_HASH = LABEL_DOMAIN + "spec-hash"
LABEL_VOLUME = LABEL_DOMAIN + "volume"
LABEL_VOLUME_TYPE = LABEL_DOMAIN + "volume-type"
LABEL_NETWORK_POOL = LABEL_DOMAIN + "network-pool"
LABEL_STOP_TIMEOUT = LABEL_DOMAIN + "stop-timeout"  # seconds a service's container gets to stop (stopGracePeriod)
LABEL_EPOCH = LABEL_DOMAIN + "epoch"  # which copy of a Persistent volume's data this is (`agent/volumes/epochs.py`)
POOL_PART = "pool."

MANAGED = "true"
_TOKEN = re.compile("[a-z0-9]+")


def project_key(project: str) -> str:
    """The key ("namespace/name") of `project`, a key or a bare name (a `default` project)."""
    namespace, name = meta.split_key(project)
    return meta.join_key(namespace or meta.DEFAULT_NAMESPACE, name)


def key_of(project: v1.Project) -> str:
    """The agent's name of `project` (in its queue, its state, its locks, its logs): the project's key, with the
    `default` namespace when the object names none."""
    return meta.join_key(project.metadata.namespace or meta.DEFAULT_NAMESPACE, project.metadata.name)


def project_in(namespace: str, name: str) -> str:
    """The key of project `name` of `namespace` ("" means `default`, as in the Agent service's requests)."""
    return meta.join_key(namespace or meta.DEFAULT_NAMESPACE, name)


def shown(project: str) -> str:
    """How labels and messages name `project` (a key or bare name): `meta.shown`."""
    return meta.shown(project)


def project_label(project: str) -> str:
    """The `caravanserai.io/project` label value of `project` (a key or bare name): see `shown`."""
    return shown(project)


def labelled_project(labels: Mapping[str, str]) -> str:
    """The key of the project an object's labels name ("" when they name none); an object without the namespace
    label (made before namespaces existed) belongs to `default`."""
    value = labels.get(LABEL_PROJECT, "")
    if not value:
        return ""
    namespace, name = meta.split_key(value)
    return meta.join_key(namespace or labels.get(LABEL_NAMESPACE) or meta.DEFAULT_NAMESPACE, name)


def container_name(project: str, service: str, node: str) -> str:
    """`cara_<project>_<service>_<node>`: the one container of a service on a node (`project`: see
    `project_part`)."""
    parts = (project_part(project), _check_part("service", service), _check_part("node", node))
    return SEPARATOR.join((PREFIX, *parts))


NEXT = "next"
OLD = "old"


def replacement_name(project: str, service: str, node: str, role: str) -> str:
    """`cara_<project>_<service>.<role>_<node>`: the new (`NEXT`) or the outgoing (`OLD`) container of a service
    while a start-first update runs both. A `.` cannot occur in a service name, so it is never a service's own
    name (`ProjectRuntime.remove_stale` removes what an interrupted update left)."""
    if role not in (NEXT, OLD):
        raise ValueError(f"invalid replacement role {role!r}")
    return container_name(project, f"{_check_part('service', service)}.{role}", node)


def network_name(project: str, node: str) -> str:
    """`cara_<project>_<node>`: the project's bridge network, on which each service is reachable by its name."""
    return SEPARATOR.join((PREFIX, project_part(project), _check_part("node", node)))


def pool_network_name(token: str, node: str) -> str:
    """`cara_pool.<token>_<node>`: a network of the node's warm pool (`token`: lower-case letters and digits)."""
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"invalid pool network token {token!r}: letters and digits only")
    return SEPARATOR.join((PREFIX, POOL_PART + token, _check_part("node", node)))


def is_pool_network(name: str, node: str) -> bool:
    """Whether `name` is a pool network name of `node` (made by `pool_network_name`)."""
    prefix, suffix = f"{PREFIX}{SEPARATOR}{POOL_PART}", f"{SEPARATOR}{node}"
    return (
        name.startswith(prefix) and name.endswith(suffix) and bool(_TOKEN.fullmatch(name[len(prefix) : -len(suffix)]))
    )


def pool_labels(node: str) -> dict[str, str]:
    """The labels of a pool network of `node`: managed, the node, and the pool mark (no project)."""
    return {LABEL_MANAGED: MANAGED, LABEL_NODE: node, LABEL_NETWORK_POOL: MANAGED}


def parse_container_name(name: str) -> tuple[str, str, str] | None:
    """(project key, service, node) of a name made by `container_name` (a leading `/`, as Docker lists names, is
    ignored); None for any other name."""
    parts = name.lstrip("/").split(SEPARATOR)
    if len(parts) not in (4, 5) or parts[0] != PREFIX or not all(parts[1:]):
        return None
    namespace = parts[1] if len(parts) == 5 else meta.DEFAULT_NAMESPACE
    return meta.join_key(namespace, parts[-3]), parts[-2], parts[-1]


def owner_labels(*, node: str, project: str, project_uid: str) -> dict[str, str]:
    """The labels every object made for `project` (a key, or a bare name for a `default` project) carries."""
    return {
        LABEL_MANAGED: MANAGED,
        LABEL_NODE: node,
        LABEL_PROJECT: project_label(project),
        LABEL_NAMESPACE: meta.split_key(project_key(project))[0],
        LABEL_PROJECT_UID: project_uid,
    }


def label_filter(labels: Mapping[str, str]) -> list[str]:
    """Docker's `label` filter values (`key=value`) for `labels`, sorted."""
    return sorted(f"{key}={value}" for key, value in labels.items())


def node_filter(node: str, **extra: str) -> list[str]:
    """Label filter for objects this node's agent manages, optionally narrowed by further labels, e.g.
    `node_filter("n1", project="team-a/web")` (keyword names are label suffixes; `_` stands for `-`; `project` is a
    key or a bare name, see `project_label`)."""
    labels = {LABEL_MANAGED: MANAGED, LABEL_NODE: node}
    for key, value in extra.items():
        labels[LABEL_DOMAIN + key.replace("_", "-")] = project_label(value) if key == "project" else value
    return label_filter(labels)


def stop_timeout(labels: Mapping[str, str], default: int) -> int:
    """Seconds a container gets between its stop signal and SIGKILL: its service's grace period as labelled at
    creation (`LABEL_STOP_TIMEOUT`), else `default` (the agent's --stop-timeout)."""
    text = labels.get(LABEL_STOP_TIMEOUT, "")
    return int(text) if text.isdigit() else default


__all__ = [
    "LABEL_DOMAIN",
    "LABEL_EPOCH",
    "LABEL_GENERATION",
    "LABEL_MANAGED",
    "LABEL_NAMESPACE",
    "LABEL_NETWORK_POOL",
    "LABEL_NODE",
    "LABEL_PROJECT",
    "LABEL_PROJECT_UID",
    "LABEL_SERVICE",
    "LABEL_SPEC_HASH",
    "LABEL_STOP_TIMEOUT",
    "LABEL_VOLUME",
    "LABEL_VOLUME_TYPE",
    "MANAGED",
    "NEXT",
    "OLD",
    "POOL_PART",
    "PREFIX",
    "SEPARATOR",
    "container_name",
    "is_pool_network",
    "labelled_project",
    "key_of",
    "label_filter",
    "network_name",
    "node_filter",
    "owner_labels",
    "parse_container_name",
    "pool_labels",
    "pool_network_name",
    "project_in",
    "project_key",
    "project_label",
    "project_part",
    "replacement_name",
    "shown",
    "stop_timeout",
    "volume_name",
]
