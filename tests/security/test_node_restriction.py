"""NodeRestriction over a real apiserver with mutual TLS: a node's certificate writes its own Node but cannot
undo its quarantine (taints, cordon), give itself an admin's label or report more than one address of a type;
its own labels (`node.caravanserai.io/…` and the automatic ones) it changes freely."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Forbidden
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer


def _node(name: str, **labels: str) -> v1.Node:
    node = meta.with_type_meta(v1.Node(metadata=v1.ObjectMeta(name=name)))
    node.metadata.labels.update(labels)
    return node


async def _quarantined(admin: Client, name: str) -> v1.Node:
    node = await admin.nodes.get(name)
    node.spec.unschedulable = True
    node.spec.taints.add(key="quarantine", value="suspect", effect="NoExecute")
    node.metadata.labels["tier"] = "untrusted"
    return await admin.nodes.update(node)


async def test_a_node_cannot_undo_its_quarantine_or_take_an_admins_label(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with (
        Client(secure_api.address, tls=tls_of("node:n1")) as n1,
        Client(secure_api.address, tls=tls_of("admin")) as admin,
    ):
        await n1.nodes.create(_node("n1", zone="eu", **{"caravanserai.io/hostname": "n1"}))  # --label at registration
        await _quarantined(admin, "n1")

        untainted = await n1.nodes.get("n1")
        del untainted.spec.taints[:]
        with pytest.raises(Forbidden) as info:
            await n1.nodes.update(untainted)
        assert str(info.value) == (
            "node:n1 may not update nodes/n1: spec.taints: only an admin may change a node's taints (caractrl taint)"
        )
        uncordoned = await n1.nodes.get("n1")
        uncordoned.spec.unschedulable = False
        with pytest.raises(Forbidden, match=r"spec\.unschedulable: only an admin may cordon or uncordon a node"):
            await n1.nodes.update(uncordoned)
        for key, value in (("tier", "trusted"), ("zone", "us"), ("gpu", "true")):  # change, change, add
            relabelled = await n1.nodes.get("n1")
            relabelled.metadata.labels[key] = value
            with pytest.raises(Forbidden, match=rf'metadata\.labels\["{key}"\]: a node may change only its own'):
                await n1.nodes.update(relabelled)
        unlabelled = await n1.nodes.get("n1")
        del unlabelled.metadata.labels["tier"]
        with pytest.raises(Forbidden, match=r'metadata\.labels\["tier"\]'):
            await n1.nodes.update(unlabelled)

        own = await n1.nodes.get("n1")  # its own labels: fine
        own.metadata.labels["node.caravanserai.io/disk"] = "ssd"
        own.metadata.labels["caravanserai.io/hostname"] = "n1-renamed"
        own.spec.hostname = "n1-renamed"
        stored = await n1.nodes.update(own)
        assert stored.metadata.labels["node.caravanserai.io/disk"] == "ssd"
        assert stored.spec.unschedulable and [t.key for t in stored.spec.taints] == ["quarantine"]
        assert stored.metadata.labels["tier"] == "untrusted"


async def test_a_node_may_not_register_with_an_admin_namespace_label(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with Client(secure_api.address, tls=tls_of("node:n2")) as n2:
        with pytest.raises(Forbidden, match=r'metadata\.labels\["dedicated\.caravanserai\.io/db"\]'):
            await n2.nodes.create(_node("n2", **{"dedicated.caravanserai.io/db": "true"}))
        await n2.nodes.create(_node("n2", **{"node.caravanserai.io/rack": "r1", "zone": "eu"}))


async def test_a_node_reports_at_most_one_address_of_each_type(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with Client(secure_api.address, tls=tls_of("node:n1")) as n1:
        node = await n1.nodes.create(_node("n1"))
        node.status.network.addresses.add(type="InternalIP", address="10.0.0.5")
        node.status.network.addresses.add(type="InternalIP", address="203.0.113.9")
        node.status.network.addresses.add(type="ExternalIP", address="not-an-ip")
        with pytest.raises(Forbidden) as info:
            await n1.nodes.update_status(node)
        assert "status.network.addresses[1].type: a node reports at most one InternalIP address" in str(info.value)
        assert "status.network.addresses[2].address: ExternalIP must be an IP address" in str(info.value)
        del node.status.network.addresses[1:]
        stored = await n1.nodes.update_status(node)
        assert [a.address for a in stored.status.network.addresses] == ["10.0.0.5"]
