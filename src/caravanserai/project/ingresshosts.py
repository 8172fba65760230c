"""The host names of a project's ingress routes: one rule for the agents' proxy and for every client that shows them.

* A host without a dot means `{host}.{project}.local` for a project of the `default` namespace and
  `{host}.{project}.{namespace}.local` for a project of any other namespace (so two projects of one name in two
  namespaces never share a host: three labels before `.local` are never two); a dotted host is used verbatim; an
  empty host means the ingress's name as `{host}`. Names are lower case, without a trailing dot.
* `normalize_host` reads a request's Host header the same way ("Web.Shop.local:8081" → "web.shop.local").
"""

from __future__ import annotations

from caravanserai import meta, v1

LOCAL_SUFFIX = ".local"
PUBLIC = "Public"
INTERNAL = "Internal"


def route_host(host: str, *, project: str, name: str, namespace: str) -> str:
    """The host name a request must carry for ingress `name` of `project` (of `namespace`; "" means `default`)
    declaring `host`."""
    if "." in host:
        return normalize_host(host)
    where = project if namespace in ("", meta.DEFAULT_NAMESPACE) else f"{project}.{namespace}"
    return f"{(host or name).lower()}.{where}{LOCAL_SUFFIX}"


def ingress_host(project: v1.Project, ingress: v1.Ingress) -> str:
    """The host name of one of `project`'s ingresses."""
    metadata = project.metadata
    return route_host(ingress.host, project=metadata.name, name=ingress.name, namespace=metadata.namespace)


def normalize_host(header: str) -> str:
    """A Host header without port, trailing dot or upper case."""
    host = header.strip()
    if host.startswith("["):  # an IPv6 literal
        host = host[: host.find("]") + 1]
    elif ":" in host:
        host = host.rsplit(":", 1)[0]
    return host.rstrip(".").lower()


__all__ = ["INTERNAL", "LOCAL_SUFFIX", "PUBLIC", "ingress_host", "normalize_host", "route_host"]
