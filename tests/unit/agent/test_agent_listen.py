"""Plain TCP only on loopback unless explicitly allowed: the agent's log service without TLS."""

from __future__ import annotations

import pytest

from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig


@pytest.mark.parametrize(
    ("listen", "allow", "expected"),
    [
        ("0.0.0.0:7421", False, "127.0.0.1:7421"),
        ("10.0.0.5:7421", False, "127.0.0.1:7421"),
        ("0.0.0.0:7421", True, "0.0.0.0:7421"),
        ("127.0.0.1:7421", False, "127.0.0.1:7421"),
        ("[::1]:7421", False, "[::1]:7421"),
    ],
)
def test_plain_log_service_binds_loopback_unless_allowed(listen: str, allow: bool, expected: str) -> None:
    agent = Agent(AgentConfig(server="127.0.0.1:7420", node_name="n1", listen=listen, allow_insecure=allow))
    assert agent._plain_listen_address() == expected  # noqa: SLF001
