"""The host names of a project's ingress routes: one rule for the agents' proxy and for every client that shows them.

* A host without a dot means `{host}.{project}.local`; a dotted host is used verbatim; an empty host means
  `{ingress name}.{project}.local`. Names are lower case, without a trailing dot.
* `normalize_host` reads a request's Host header the same way ("Web.Shop.local:8081" → "web.shop.local").
"""

from __future__ import annotations

from caravanserai import v1

LOCAL_SUFFIX = ".local"
PUBLIC = "Public"
INTERNAL = "Internal"


def route_host(host: str, *, project: str, name: str) -> str:
    """The host name a request must carry for ingress `name` of `project` declaring `host`."""
    if "." in host:
        return normalize_host(host)
    return f"{(host or name).lower()}.{project}{LOCAL_SUFFIX}"


def ingress_host(project: v1.Project, ingress: v1.Ingress) -> str:
    """The host name of one of `project`'s ingresses."""
    return route_host(ingress.host, project=project.metadata.name, name=ingress.name)


def normalize_host(header: str) -> str:
    """A Host header without port, trailing dot or upper case."""
    host = header.strip()
    if host.startswith("["):  # an IPv6 literal
        host = host[: host.find("]") + 1]
    elif ":" in host:
        host = host.rsplit(":", 1)[0]
    return host.rstrip(".").lower()


__all__ = ["INTERNAL", "LOCAL_SUFFIX", "PUBLIC", "ingress_host", "normalize_host", "route_host"]
