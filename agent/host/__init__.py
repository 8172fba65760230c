"""Facts about the node: capacity, extended resources and GPUs, throughput to the control plane."""
