"""Custom kinds: schemas compiled from ResourceDefinitions (`schemas`) and .proto files compiled for them (`protoc`)."""
