"""How a node names a project's Docker objects: the part of the rule clients show too (caractrl's DOCKER-VOLUME),
so that it has one home. The agent's whole scheme (containers, networks, labels) is `caravanserai.agent.docker.naming`.

* `cara_<project>_<volume>_<node>`, parts joined by `_`, which no DNS name contains, so names read back
  unambiguously and never collide.
* `<project>` (`project_part`) is a `default` project's name, as before namespaces existed (an upgraded agent adopts
  what it runs), and `<namespace>_<name>` in any other namespace: one `_`-part more, so a name of one kind is never
  a name of the other.
"""

from __future__ import annotations

from caravanserai import meta

PREFIX = "cara"
SEPARATOR = "_"


def check_part(kind: str, value: str) -> str:
    """`value` when it can be a part of a name (non-empty, without `SEPARATOR`); ValueError naming `kind` else."""
    if not value or SEPARATOR in value:
        raise ValueError(f"invalid {kind} name {value!r}: must be a non-empty DNS name (no {SEPARATOR!r})")
    return value


def project_part(project: str) -> str:
    """The part of Docker names (and of the agent's paths) naming `project` (a key "namespace/name", or a bare name
    for a `default` project): its name in `default`, `<namespace>_<name>` in any other namespace."""
    namespace, name = meta.split_key(project)
    check_part("project", name)
    if namespace in ("", meta.DEFAULT_NAMESPACE):
        return name
    return SEPARATOR.join((check_part("namespace", namespace), name))


def volume_name(project: str, volume: str, node: str) -> str:
    """`cara_<project>_<volume>_<node>`: a declared volume of `project` (a key or a bare name) on `node`."""
    parts = (project_part(project), check_part("volume", volume), check_part("node", node))
    return SEPARATOR.join((PREFIX, *parts))


__all__ = ["PREFIX", "SEPARATOR", "check_part", "project_part", "volume_name"]
