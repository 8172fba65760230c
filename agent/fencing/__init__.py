"""Fencing: the deadline by which this node's containers must have stopped when the control plane no longer hears
from it (`record`: the file the agent and the watchdog share), the stops that meet it (`stops`), and the node's
watchdog (`watchdog`, `cara-fence-watchdog`), which meets it when the agent cannot (frozen, killed, stopped)."""
