"""One invariant's verdict line in the soak's report."""

from __future__ import annotations


def line(name: str, figure: object, target: str, held: bool, detail: str = "") -> dict[str, object]:
    """One invariant's verdict line: its name, the figure judged, the target it was held to, held or violated."""
    return {"invariant": name, "figure": figure, "target": target, "verdict": "held" if held else "violated",
            "detail": detail}  # fmt: skip


__all__ = ["line"]
