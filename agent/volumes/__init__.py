"""The agent's volumes room: restic backups of Persistent volumes, restores before start, and which copy of a
volume's data is current (epochs). Docker is reached only through the Docker room (`agent/docker/`)."""
