"""Who uses a Secret or a Config: what `caractrl delete` checks before it removes one.

Guarantees:

* `data_users(resource)` gives the `KindView.users` of a kind that projects read (`secrets`, `configs`): the
  projects whose spec references the object (`caravanserai.project.datarefs`, the one reading of references, the
  same the node authorizer follows), and for a Secret the BackupRepositories whose `spec.secret` names it; each as
  `project/NAME` or `backuprepository/NAME`, sorted; only those of the object's namespace (the command's,
  `client.namespace`): a project references Secrets and Configs of its own namespace. Terminated projects need
  nothing and are not counted.
* The check is the CLI's, like kubectl's checks before a delete: it reads, then the delete follows, so a project
  created in between is not seen. The apiserver itself does not check references (as Kubernetes does not): a
  missing Secret or Config is reported by the agent on the service that waits for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.project import datarefs

Users = Callable[[Client, str], Awaitable[list[str]]]
"""`users(client, name)`: who still uses the object `name` of the command's namespace, or of the key
"namespace/name" (`project/web`, …), sorted; empty when nobody does."""


def data_users(resource: str) -> Users:
    """The users of an object of `resource` ("secrets" or "configs") that projects read."""

    async def users(client: Client, name: str) -> list[str]:
        namespace, name = meta.split_key(name)
        namespace = namespace or client.namespace
        found = [
            f"project/{project.metadata.name}"
            for project in await client.projects.list(namespace=namespace)
            if project.status.phase != v1.TERMINATED and datarefs.references(project.spec, resource, name)
        ]
        if resource == datarefs.SECRETS:
            repositories = await client.backuprepositories.list(namespace=namespace)
            found += [f"backuprepository/{r.metadata.name}" for r in repositories if r.spec.secret == name]
        return sorted(found)

    return users


__all__ = ["Users", "data_users"]
