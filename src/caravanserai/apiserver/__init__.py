"""cara-apiserver: the only etcd client; validation, defaulting, optimistic concurrency and watch fan-out."""
