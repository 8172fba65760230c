"""Compose names (`[a-zA-Z0-9._-]+`) to DNS labels, the names of a Project's services, volumes and the project."""

from __future__ import annotations

import re

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dns_label(name: str) -> str:
    """`name` lower-cased, with `_` and `.` as `-`, trimmed of `-` at both ends and cut to 63 characters ("" when
    nothing is left)."""
    label = re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")
    return label[:63].rstrip("-")


def is_dns_label(name: str) -> bool:
    """Whether `name` is already a DNS label."""
    return len(name) <= 63 and _LABEL.match(name) is not None


__all__ = ["dns_label", "is_dns_label"]
