"""The async Python client of the Caravanserai API.

    async with Client("127.0.0.1:7420") as c:
        project = await c.projects.get("web")
        page = await c.projects.list(field_selector="status.phase=Pending")
        async for event in c.projects.watch(resource_version=page.resource_version):
            print(event.type, event.object.metadata.name)

Errors are the tree of `caravanserai.errors`; gRPC exceptions never escape.
"""

from caravanserai.client.client import DEFAULT_SERVER, Change, Client, ObjectList, ResourceClient, server_address
from caravanserai.client.definitions import DefinitionMissing, IncompatibleDefinition
from caravanserai.client.options import add_client_arguments, client_from_args

__all__ = [
    "DEFAULT_SERVER",
    "Change",
    "Client",
    "DefinitionMissing",
    "IncompatibleDefinition",
    "ObjectList",
    "ResourceClient",
    "add_client_arguments",
    "client_from_args",
    "server_address",
]
