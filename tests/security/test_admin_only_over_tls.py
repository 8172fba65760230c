"""Only an admin may write what reaches the node (privileged, devices, the host network, HostPath volumes), over a
real apiserver with mutual TLS: the rule is the project strategy's, so a role that may write project specs but is
not admin — none exists today; `controller:manager` is given the right for the test — is refused every such field
by path, while an admin is not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds.project import KIND, ProjectStrategy
from caravanserai.client import Client
from caravanserai.errors import Forbidden
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project


class ControllersWriteProjects(ProjectStrategy):
    """The project strategy with controllers allowed to write specs: the stand-in for a later team role."""

    controller_writes = frozenset({"create", "update", "update_status", "delete"})


def reaching_the_node(name: str) -> v1.Project:
    p = project(name)
    p.spec.services[0].privileged = True
    p.spec.volumes.add(name="site", type=v1.VOLUME_HOST_PATH, host_path="/srv/site")
    return p


async def test_a_writer_who_is_not_admin_is_refused_each_field_by_path_and_an_admin_is_not(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    secure_api.server.service.kinds.add(ControllersWriteProjects(KIND))
    async with Client(secure_api.address, tls=tls_of("controller:manager")) as writer:
        with pytest.raises(Forbidden) as info:
            await writer.projects.create(reaching_the_node("edge"))
        assert str(info.value) == (
            "controller:manager may not create projects/edge: "
            "spec.services[0].privileged: only an admin may run a privileged container; "
            "spec.volumes[0].type: only an admin may mount a host path (HostPath)"
        )
        plain = await writer.projects.create(project("plain"))  # the same writer, nothing that reaches the node
        plain.spec.services[0].network_mode = v1.NETWORK_MODE_HOST
        with pytest.raises(Forbidden, match=r"spec\.services\[0\]\.networkMode: only an admin may use the node's"):
            await writer.projects.update(plain)
    async with Client(secure_api.address, tls=tls_of("admin")) as admin:
        created = await admin.projects.create(reaching_the_node("edge"))
        assert created.spec.services[0].privileged
