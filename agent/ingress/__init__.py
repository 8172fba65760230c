"""The agent's ingress: route table, reverse proxy, HTTP details and where a service can be reached."""
