"""Text that operators type: manifests and their files, protobuf JSON, selectors, quantities, durations, and the
violations that name a field."""
