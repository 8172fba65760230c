"""Schema evolution of custom kinds, as the apiserver checks it: see `caravanserai.customkinds.evolution` (shared
with the client, which checks that its classes are compatible with the served definition)."""

from caravanserai.customkinds.evolution import RetiredField, breaking_changes, holds_field, retired_fields

__all__ = ["RetiredField", "breaking_changes", "holds_field", "retired_fields"]
