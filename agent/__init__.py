"""cara-agent: the process on every node that runs its assigned projects on Docker."""
