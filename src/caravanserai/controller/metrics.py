"""Prometheus text metrics of controllers and their work queues, without a client library.

What is measured, per controller (label `controller`, or `name` for the queue, as in controller-runtime):

    caravanserai_workqueue_depth                    keys queued now
    caravanserai_workqueue_adds_total               keys that became queued (collapsed adds not counted)
    caravanserai_workqueue_retries_total            rate-limited re-adds
    caravanserai_workqueue_queue_duration_seconds   histogram: add → handed to a worker
    caravanserai_workqueue_work_duration_seconds    histogram: handed out → done
    caravanserai_controller_reconcile_total         reconciles by result: success, requeue_after, error, terminal
    caravanserai_controller_reconcile_errors_total  reconciles that raised (error and terminal)
    caravanserai_controller_reconcile_time_seconds  histogram of reconcile durations
    caravanserai_controller_active_workers          workers inside a reconcile now

and per informer (label `resource`): events applied by type, lists, watches, cached objects, pending
notifications, synced.

`render` turns `MetricFamily` values into the text exposition format (version 0.0.4). Recording is plain
attribute arithmetic: cheap enough for every event.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caravanserai.informer import Informer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RESULTS = ("success", "requeue_after", "error", "terminal")


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(slots=True)
class MetricFamily:
    name: str
    help: str
    type: str  # counter | gauge | histogram
    samples: list[Sample] = field(default_factory=list)


class Histogram:
    """Counts of observations at or below each bucket bound, plus their sum and count."""

    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.buckets = tuple(sorted(buckets))
        self._counts = [0] * len(self.buckets)  # non-cumulative: observations in (previous bound, bound]
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self._counts):
            self._counts[index] += 1
        self.count += 1
        self.sum += value

    def samples(self, name: str, labels: Mapping[str, str]) -> list[Sample]:
        out: list[Sample] = []
        cumulative = 0
        for upper, count in zip(self.buckets, self._counts, strict=True):
            cumulative += count
            out.append(Sample(f"{name}_bucket", {**labels, "le": _number(upper)}, cumulative))
        out.append(Sample(f"{name}_bucket", {**labels, "le": "+Inf"}, self.count))
        out.append(Sample(f"{name}_sum", labels, self.sum))
        out.append(Sample(f"{name}_count", labels, self.count))
        return out


class QueueStats:
    """A `caravanserai.workqueue.QueueMetrics` that keeps the numbers for `/metrics`."""

    def __init__(self) -> None:
        self.adds = 0
        self.current_depth = 0
        self.retries = 0
        self.latency = Histogram()
        self.work = Histogram()

    def added(self, key: Hashable) -> None:
        self.adds += 1

    def depth(self, queued: int) -> None:
        self.current_depth = queued

    def queue_latency(self, key: Hashable, seconds: float) -> None:
        self.latency.observe(seconds)

    def work_duration(self, key: Hashable, seconds: float) -> None:
        self.work.observe(seconds)

    def retried(self, key: Hashable) -> None:
        self.retries += 1


class ControllerMetrics:
    """The numbers of one controller and its queue."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue = QueueStats()
        self.results: dict[str, int] = dict.fromkeys(RESULTS, 0)
        self.reconcile_time = Histogram()
        self.active_workers = 0

    @property
    def errors(self) -> int:
        return self.results["error"] + self.results["terminal"]

    def reconciled(self, result: str, seconds: float) -> None:
        self.results[result] += 1
        self.reconcile_time.observe(seconds)


def controller_families(controllers: Iterable[ControllerMetrics]) -> list[MetricFamily]:
    """The metric families of a set of controllers, one sample set per controller."""
    q = "caravanserai_workqueue_"
    c = "caravanserai_controller_"
    depth = MetricFamily(q + "depth", "Current depth of the work queue.", "gauge")
    adds = MetricFamily(q + "adds_total", "Keys added to the work queue.", "counter")
    retries = MetricFamily(q + "retries_total", "Rate-limited re-adds to the work queue.", "counter")
    latency = MetricFamily(q + "queue_duration_seconds", "Time a key waits in the queue.", "histogram")
    work = MetricFamily(q + "work_duration_seconds", "Time a key is held by a worker.", "histogram")
    total = MetricFamily(c + "reconcile_total", "Reconciles by result.", "counter")
    errors = MetricFamily(c + "reconcile_errors_total", "Reconciles that raised.", "counter")
    time = MetricFamily(c + "reconcile_time_seconds", "Duration of reconciles.", "histogram")
    active = MetricFamily(c + "active_workers", "Workers inside a reconcile now.", "gauge")
    for m in controllers:
        queue_labels, labels = {"name": m.name}, {"controller": m.name}
        depth.samples.append(Sample(depth.name, queue_labels, m.queue.current_depth))
        adds.samples.append(Sample(adds.name, queue_labels, m.queue.adds))
        retries.samples.append(Sample(retries.name, queue_labels, m.queue.retries))
        latency.samples.extend(m.queue.latency.samples(latency.name, queue_labels))
        work.samples.extend(m.queue.work.samples(work.name, queue_labels))
        for result, count in m.results.items():
            total.samples.append(Sample(total.name, {**labels, "result": result}, count))
        errors.samples.append(Sample(errors.name, labels, m.errors))
        time.samples.extend(m.reconcile_time.samples(time.name, labels))
        active.samples.append(Sample(active.name, labels, m.active_workers))
    return [depth, adds, retries, latency, work, total, errors, time, active]


def informer_families(informers: Iterable[Informer[Any]]) -> list[MetricFamily]:
    """The metric families of a set of informers (label `resource`, plus `selector` when one is set)."""
    i = "caravanserai_informer_"
    events = MetricFamily(i + "events_total", "Changes applied to the cache, by type.", "counter")
    lists = MetricFamily(i + "lists_total", "Completed lists (the first and every relist).", "counter")
    watches = MetricFamily(i + "watches_total", "Watches started.", "counter")
    cached = MetricFamily(i + "cached_objects", "Objects in the cache.", "gauge")
    pending = MetricFamily(i + "pending_notifications", "Notifications waiting for handlers.", "gauge")
    synced = MetricFamily(i + "synced", "1 once the first list was delivered.", "gauge")
    for informer in informers:
        labels = {"resource": informer.resource}
        selector = ";".join(s for s in (informer.label_selector, informer.field_selector) if s)
        if selector:
            labels["selector"] = selector
        for type_, count in informer.counts.items():
            events.samples.append(Sample(events.name, {**labels, "type": type_}, count))
        lists.samples.append(Sample(lists.name, labels, informer.reflector.lists))
        watches.samples.append(Sample(watches.name, labels, informer.reflector.watches))
        cached.samples.append(Sample(cached.name, labels, len(informer.cache)))
        pending.samples.append(Sample(pending.name, labels, informer.pending))
        synced.samples.append(Sample(synced.name, labels, 1 if informer.has_synced() else 0))
    return [events, lists, watches, cached, pending, synced]


def render(families: Iterable[MetricFamily]) -> str:
    """The Prometheus text exposition of `families`."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for sample in family.samples:
            lines.append(f"{sample.name}{_labels(sample.labels)} {_number(sample.value)}")
    return "\n".join(lines) + "\n"


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escape_value(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


__all__ = [
    "CONTENT_TYPE",
    "ControllerMetrics",
    "Histogram",
    "LATENCY_BUCKETS",
    "MetricFamily",
    "QueueStats",
    "RESULTS",
    "Sample",
    "controller_families",
    "informer_families",
    "render",
]
