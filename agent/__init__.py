"""cara-agent: the process on every node that runs its assigned projects on Docker.

    await Agent(AgentConfig(server="10.0.0.1:7420", node_name="node-1")).run()

See `caravanserai.agent.agent` for the parts and their guarantees, and docs/agent.md for the behaviour.
"""

from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig

__all__ = ["Agent", "AgentConfig"]
