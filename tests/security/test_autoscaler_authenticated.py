"""The autoscaler under authentication: over mutual TLS as `controller:autoscaler`, it labels a registered node into
its group (scale-up) and cordons and deletes it once idle (scale-down), which no other controller identity may."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from integration.cluster_sim import add_node, running_manager

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.autoscaler import app as autoscaler_app
from caravanserai.controllers.autoscaler.providers import ProviderNode, Providers
from caravanserai.controllers.autoscaler.reconciler import AutoscalerConfig
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.errors import NotFound
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CONFIG = AutoscalerConfig(scan_interval=0.2, new_node_grace=2.0, handoff_timeout=2.0)


class AgentLikeProvider(Providers):
    """Registers each node asked for as its agent would: without the group label (a node may not set labels of the
    caravanserai.io namespace), so the autoscaler must add it. Registration goes through the admin's client."""

    def __init__(self, admin: Client) -> None:
        super().__init__()
        self.admin = admin
        self.created: list[str] = []
        self.deleted: list[str] = []

    def of(self, group: v1.NodeGroup) -> AgentLikeProvider:  # type: ignore[override]  # the provider itself
        return self

    async def increase(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        for name in nodes:
            if name not in self.created:
                self.created.append(name)
                await add_node(self.admin, name, cpu="4")

    async def delete(self, group: v1.NodeGroup, nodes: Sequence[str]) -> None:
        self.deleted.extend(nodes)

    async def list(self, group: v1.NodeGroup) -> list[ProviderNode] | None:
        return None


def _group() -> v1.NodeGroup:
    group = v1.NodeGroup(api_version="caravanserai/v1", kind="NodeGroup")
    group.metadata.name = "gpu"
    group.spec.max_size = 2
    group.spec.template.allocatable.update({"cpu": "4", "memory": "8Gi"})
    group.spec.template.labels["example.com/pool"] = "a"
    group.spec.template.taints.add(key="dedicated", value="gpu", effect="NoSchedule")
    group.spec.provider.exec.create.append("true")
    group.spec.provider.exec.delete.append("true")
    group.spec.scale_down.idle_time = "1s"
    return group


async def test_the_autoscaler_labels_and_deletes_nodes_as_controller_autoscaler(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with (
        Client(secure_api.address, tls=tls_of("admin")) as admin,
        Client(secure_api.address, tls=tls_of("controller:autoscaler")) as autoscaler,
    ):
        await add_node(admin, "small", cpu="500m")
        await admin.nodegroups.create(_group())
        provider = AgentLikeProvider(admin)
        clock = SystemClock()

        def setup(manager: Manager) -> None:
            scheduler_app.setup(manager, autoscaler, clock)
            parts = autoscaler_app.setup(manager, autoscaler, clock, autoscaler_app.AutoscalerOptions(CONFIG))
            parts.reconciler.providers = provider
            for step in (parts.reconciler._book, parts.reconciler._up, parts.reconciler._down):  # noqa: SLF001  # the test's provider
                object.__setattr__(step, "providers", provider)

        waiting = project("trainer", requests={"cpu": "2"})
        waiting.spec.tolerations.add(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule")
        async with running_manager(autoscaler, setup, clock=clock):
            await admin.projects.create(waiting)
            await wait_for(lambda: len(provider.created) == 1, timeout=30)
            (name,) = provider.created

            async def labelled() -> bool:
                node = await admin.nodes.get(name)
                return node.metadata.labels.get(v1.LABEL_NODE_GROUP) == "gpu"

            await wait_for(labelled, timeout=20)
            node = await admin.nodes.get(name)
            assert node.metadata.labels["example.com/pool"] == "a"
            assert [(t.key, t.value) for t in node.spec.taints] == [("dedicated", "gpu")]

            async def bound() -> bool:
                return (await admin.projects.get("trainer")).status.node_ref == name

            await wait_for(bound, timeout=20)
            await admin.projects.delete("trainer", force=True)

            async def removed() -> bool:
                try:
                    await admin.nodes.get(name)
                except NotFound:
                    return provider.deleted == [name]
                return False

            await wait_for(removed, timeout=30)

            async def recorded() -> bool:  # the group's status is written after the node went
                return list((await admin.nodegroups.get("gpu")).status.last_scale_down.nodes) == [name]

            await wait_for(recorded, timeout=10)
