"""What a Project means: its lifecycle, service graph, the Secrets and Configs it reads, granted resources, ingress
host names, registry credentials."""
