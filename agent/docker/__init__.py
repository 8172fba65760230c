"""The agent's Docker room: the only code that talks to Docker (aiodocker), its typed records, events, exec, and the
create configurations and names it uses."""
