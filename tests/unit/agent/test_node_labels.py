"""The agent's view of NodeRestriction matches the apiserver's: which labels are the node's and which the admin's."""

from __future__ import annotations

import pytest

from caravanserai.agent.__main__ import parser
from caravanserai.agent.host import extended
from caravanserai.apiserver.kinds import node

KEYS = [
    "zone",
    "example.com/rack",
    "caravanserai.io/hostname",
    "caravanserai.io/os",
    "caravanserai.io/arch",
    "node.caravanserai.io/disk",
    "caravanserai.io/dedicated",
    "dedicated.caravanserai.io/db",
    "notcaravanserai.io/x",
]


@pytest.mark.parametrize("key", KEYS)
def test_the_agent_and_the_apiserver_agree(key: str) -> None:
    assert extended.node_owned_label(key) == node.node_owned_label(key)
    assert extended.admin_label(key) == node.admin_label(key)


def test_automatic_labels_are_the_nodes_own() -> None:
    assert set(extended.automatic_labels("h")) == node.AUTOMATIC_LABELS


def test_a_label_of_the_admin_namespace_is_refused_at_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--label", "dedicated.caravanserai.io/db=true"])
    assert "the caravanserai.io namespace is the admin's" in capsys.readouterr().err
    opts = parser().parse_args(["--label", "zone=eu", "--label", "node.caravanserai.io/disk=ssd"])
    assert opts.label == [("zone", "eu"), ("node.caravanserai.io/disk", "ssd")]


def test_the_advertised_address_is_an_ip_or_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert parser().parse_args([]).advertise_address == ""
    assert parser().parse_args(["--advertise-address", "10.0.0.1"]).advertise_address == "10.0.0.1"
    with pytest.raises(SystemExit):
        parser().parse_args(["--advertise-address", "host.example"])
    assert "is not an IP address" in capsys.readouterr().err
