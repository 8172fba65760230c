"""The agent's `Agent` gRPC service: logs, port-forward and exec into a project's containers."""
