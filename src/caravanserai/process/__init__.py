"""The process kit every `__main__` needs: logging, the `--help` layout, gRPC health and reflection, child processes,
TLS files, who is calling."""
