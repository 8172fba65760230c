"""What the scheduler tells about a binding's costs: `status.placement` and the Scheduled event's reason.

At bind the scheduler records, in the same compare-and-swap write as the binding, what it estimated for the chosen
node and the runner-up (`placement`: one `NodeEstimate` each, from `caravanserai.project.movecost`, with the node's
total score). When those estimates are what set the nodes apart, the Scheduled event says so (`bound_message`):

    Bound to node-b: starts in ~4 s (1.0 GiB to restore at 250 MB/s); runner-up node-a ~40 s

Guarantees: pure; estimates are computed for two nodes per binding only, never per node searched; the message is
None (the event keeps its plain "Successfully assigned …") unless a restore is needed on the chosen node, the
chosen or the runner-up cannot keep up with the backups, or the two start delays differ by at least
`NOTABLE_DELAY_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Callable

from caravanserai import v1
from caravanserai.controllers.scheduler.algorithm import Decision
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.project.movecost import SOURCE_ASSUMED, estimate
from caravanserai.text.durations import format_duration

NOTABLE_DELAY_SECONDS = 1.0

_BINARY_UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))
_DECIMAL_RATES = (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3))


def placement(
    project: ProjectInfo, decision: Decision, node: Callable[[str], NodeInfo | None]
) -> v1.PlacementEstimates | None:
    """The estimates for the decision's chosen node and runner-up (`node` looks a node up by name); None when
    the decision chose nothing or its node is unknown."""
    chosen = node(decision.node) if decision.node is not None else None
    if chosen is None:
        return None
    out = v1.PlacementEstimates()
    out.chosen.CopyFrom(estimate(project.needs, chosen).message(decision.score))
    runner_up = node(decision.runner_up) if decision.runner_up is not None else None
    if runner_up is not None:
        out.runner_up.CopyFrom(estimate(project.needs, runner_up).message(decision.runner_up_score))
    return out


def matters(placement: v1.PlacementEstimates) -> bool:
    """Whether the estimates set the nodes apart (see the module docstring)."""
    chosen = placement.chosen
    if chosen.restore_bytes > 0 or not chosen.rpo_feasible:
        return True
    if not placement.HasField("runner_up"):
        return False
    runner_up = placement.runner_up
    apart = abs(runner_up.start_delay_seconds - chosen.start_delay_seconds) >= NOTABLE_DELAY_SECONDS
    return apart or not runner_up.rpo_feasible


def bound_message(placement: v1.PlacementEstimates, every: float | None = None) -> str | None:
    """ "Bound to node-b: starts in ~4 s (1.0 GiB to restore at 250 MB/s); runner-up node-a ~40 s" when the
    estimates matter, else None. `every` (the project's shortest backup interval) is named when the chosen node
    cannot keep up with it."""
    if not matters(placement):
        return None
    chosen = placement.chosen
    text = f"Bound to {chosen.node}: {_start_text(chosen)}"
    if not chosen.rpo_feasible:
        text += "; " + _rpo_text(chosen, every)
    if placement.HasField("runner_up"):
        runner_up = placement.runner_up
        text += f"; runner-up {runner_up.node} {_delay_text(runner_up.start_delay_seconds)}"
        if not runner_up.rpo_feasible:
            text += " (backups would lag)"
    return text


def _start_text(estimate: v1.NodeEstimate) -> str:
    parts = []
    if estimate.image_bytes:
        parts.append(f"{bytes_text(estimate.image_bytes)} to pull")
    if estimate.restore_bytes:
        parts.append(f"{bytes_text(estimate.restore_bytes)} to restore")
    if not parts:
        return "starts at once (nothing to pull or restore)"
    rate = rate_text(estimate.download_rate)
    at = f"at an assumed {rate}" if estimate.download_rate_source == SOURCE_ASSUMED else f"at {rate}"
    return f"starts in {_delay_text(estimate.start_delay_seconds)} ({' and '.join(parts)} {at})"


def _rpo_text(estimate: v1.NodeEstimate, every: float | None) -> str:
    upload = estimate.rpo_bytes / estimate.upload_rate if estimate.upload_rate > 0 else 0.0
    text = f"backups may lag: {bytes_text(estimate.rpo_bytes)} per backup take {_delay_text(upload)} to upload"
    return text + (f", longer than every ({format_duration(every)})" if every else "")


def _delay_text(seconds: float) -> str:
    if seconds < 1:
        return "<1 s"
    if seconds < 90:
        return f"~{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"


def bytes_text(count: int) -> str:
    """Bytes for a sentence: "1.0 GiB", "12.5 GiB", "200 MiB", "512 B"."""
    for unit, size in _BINARY_UNITS:
        if count >= size:
            return f"{_figure(count / size)} {unit}"
    return f"{count} B"


def rate_text(bytes_per_second: float) -> str:
    """A rate for a sentence: "250 MB/s", "12.5 MB/s", "800 B/s"."""
    for unit, size in _DECIMAL_RATES:
        if bytes_per_second >= size:
            return f"{_figure(bytes_per_second / size)} {unit}"
    return f"{bytes_per_second:.0f} B/s"


def _figure(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


__all__ = ["NOTABLE_DELAY_SECONDS", "bound_message", "bytes_text", "matters", "placement", "rate_text"]
