"""What the apiserver measures, in Prometheus form (`prometheus_client`).

Every `ApiMetrics` has its own `CollectorRegistry` (never the process-global one), so several apiservers in one
process — as in tests — keep separate counts. What is measured:

    caravanserai_apiserver_requests_total{verb,resource,code}            requests answered, by gRPC status name
    caravanserai_apiserver_request_duration_seconds{verb,resource,code}  histogram of unary requests (Watch: counted
                                                                         when it ends, not timed: it is long-running)
    caravanserai_apiserver_inflight_requests                             unary requests being served now (as the
                                                                         in-flight limiter counts them)
    caravanserai_apiserver_refused_requests_total                        refused by the in-flight limits
    caravanserai_apiserver_watchers{resource}                            open watches
    caravanserai_apiserver_watch_pending_events{resource}                events queued to watchers, not yet sent
    caravanserai_apiserver_watch_cache_revision{resource}                etcd revision the watch cache has applied
    caravanserai_apiserver_watch_cache_lag_seconds{resource}             age of the oldest write of this apiserver
                                                                         the watch cache has not applied yet (0: none)
    caravanserai_apiserver_etcd_request_duration_seconds{operation}      histogram of store operations (each one
                                                                         etcd request: get, list, create, update …)
    caravanserai_apiserver_objects{resource}                             objects stored, as the watch cache holds them

Recording is cheap (a counter and a histogram per request); the gauges are computed when scraped.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from caravanserai.apiserver.limits import InflightLimiter
from caravanserai.apiserver.watchcache import WatchCache
from caravanserai.clock import Clock
from caravanserai.storage import Store

PREFIX = "caravanserai_apiserver"
RESOURCES_SERVICE = "caravanserai.v1.Resources"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Store operations timed as etcd requests; each is one etcd round trip.
STORE_OPERATIONS = ("get", "list", "create", "update", "delete", "current_revision", "compact", "grant_lease")
WRITE_OPERATIONS = ("create", "update", "delete")
UNKNOWN_RESOURCE = "unknown"  # the resource label of requests for a resource that is not served
MAX_WRITES_REMEMBERED = 10_000  # per resource, for the lag gauge


class ApiMetrics:
    """The apiserver's metrics. Hooks: `wrap_handler(…)` for the gRPC methods, `instrument(store)`,
    `watch_caches(…)`."""

    def __init__(self, *, clock: Clock) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            f"{PREFIX}_requests", "API requests answered.", ["verb", "resource", "code"], registry=self.registry
        )
        self.latency = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Time to answer a unary API request.",
            ["verb", "resource", "code"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.etcd_latency = Histogram(
            f"{PREFIX}_etcd_request_duration_seconds",
            "Time of one store operation (one etcd request).",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        # resource → (revision, monotonic time) of writes not yet seen applied by the watch cache, oldest first
        self._writes: dict[str, collections.deque[tuple[int, float]]] = collections.defaultdict(
            lambda: collections.deque(maxlen=MAX_WRITES_REMEMBERED)
        )
        self._caches: Mapping[str, WatchCache] = {}
        self._limiter: InflightLimiter | None = None
        self._handlers = _Handlers(self)
        self.registry.register(_StateCollector(self))

    # ---- hooks --------------------------------------------------------------------------------------------

    def watch_caches(self, caches: Mapping[str, WatchCache], limiter: InflightLimiter) -> None:
        """Report the state of these caches and this limiter when scraped."""
        self._caches = caches
        self._limiter = limiter

    def wrap_handler(self, verb: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """`handler` of the Resources method `verb`, counted and timed on every call (see `_Handlers`)."""
        return self._handlers.wrap(verb, handler)

    def instrument(self, store: Store) -> Store:
        """Time every store operation of `store` (in place) and remember writes for the lag gauge; returns it."""
        for name in STORE_OPERATIONS:
            method = getattr(store, name, None)
            if method is not None:
                setattr(store, name, self._timed(name, method))
        return store

    def exposition(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    # ---- recording ----------------------------------------------------------------------------------------

    def _timed(self, operation: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        histogram = self.etcd_latency.labels(operation)

        @functools.wraps(method)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = self.clock.monotonic()
            try:
                result = await method(*args, **kwargs)
            finally:
                histogram.observe(self.clock.monotonic() - start)
            if operation in WRITE_OPERATIONS and isinstance(result, int) and args:
                resource = str(args[0])
                self._writes[resource].append((result, self.clock.monotonic()))
                self._forget_applied(resource)
            return result

        return timed

    def _forget_applied(self, resource: str) -> collections.deque[tuple[int, float]] | None:
        """The writes of `resource` its watch cache has not applied yet, those it has dropped (on every write, so
        the queue holds only the writes in flight whether or not anyone scrapes)."""
        cache = self._caches.get(resource)
        writes = self._writes.get(resource)
        if cache is not None and writes:
            while writes and writes[0][0] <= cache.revision:
                writes.popleft()
        return writes

    def cache_lag(self, resource: str) -> float:
        """Seconds since the oldest write of `resource` that its watch cache has not applied yet (0 when none)."""
        if resource not in self._caches:
            return 0.0
        writes = self._forget_applied(resource)
        return self.clock.monotonic() - writes[0][1] if writes else 0.0

    def observe(self, verb: str, resource: str, code: str, seconds: float | None) -> None:
        """Count one answered request (and time it, unless `seconds` is None)."""
        self._handlers.observe(verb, resource, code, seconds)


class _StateCollector(Collector):
    """The gauges computed at scrape time from the watch caches and the in-flight limiter."""

    def __init__(self, metrics: ApiMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        families = {
            "watchers": GaugeMetricFamily(f"{PREFIX}_watchers", "Open watches.", labels=["resource"]),
            "pending": GaugeMetricFamily(
                f"{PREFIX}_watch_pending_events", "Events queued to watchers, not yet sent.", labels=["resource"]
            ),
            "revision": GaugeMetricFamily(
                f"{PREFIX}_watch_cache_revision", "etcd revision the watch cache has applied.", labels=["resource"]
            ),
            "lag": GaugeMetricFamily(
                f"{PREFIX}_watch_cache_lag_seconds",
                "Age of the oldest write of this apiserver not yet applied by the watch cache.",
                labels=["resource"],
            ),
            "objects": GaugeMetricFamily(f"{PREFIX}_objects", "Objects stored.", labels=["resource"]),
        }
        for resource, cache in sorted(m._caches.items()):
            families["watchers"].add_metric([resource], cache.watcher_count)
            families["pending"].add_metric([resource], cache.pending_events)
            families["revision"].add_metric([resource], cache.revision)
            families["lag"].add_metric([resource], m.cache_lag(resource))
            families["objects"].add_metric([resource], len(cache.objects))
        yield from families.values()
        refused = CounterMetricFamily(f"{PREFIX}_refused_requests", "Requests refused by the in-flight limits.")
        refused.add_metric([], m._limiter.refused if m._limiter is not None else 0)
        yield refused
        inflight = GaugeMetricFamily(f"{PREFIX}_inflight_requests", "Unary API requests being served.")
        inflight.add_metric([], m._limiter.inflight if m._limiter is not None else 0)
        yield inflight


class _Handlers:
    """Wraps the method handlers of the Resources service so that each call is counted by verb, resource and
    status code. Applied once, when the server is built (no gRPC interceptor: an interceptor makes grpc.aio look up
    every call's handler through a chain of coroutines). The labelled children of the counter and the histogram are
    kept per (verb, resource, code), so a call records without building label tuples or taking the family lock."""

    def __init__(self, metrics: ApiMetrics) -> None:
        self._metrics = metrics
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def wrap(self, verb: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """`handler` (of method `verb`), counted and timed."""
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary(verb, handler.unary_unary))  # type: ignore[attr-defined, no-any-return]  # grpc's handlers are namedtuples; the stubs do not say so
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._stream(verb, handler.unary_stream))  # type: ignore[attr-defined, no-any-return]  # grpc's handlers are namedtuples; the stubs do not say so
        return handler

    def observe(self, verb: str, resource: str, code: str, seconds: float | None) -> None:
        """Count one answered request (and time it, unless `seconds` is None). A resource the apiserver does not
        serve is labelled `unknown`: a client naming made-up resources must not grow the label set (and memory)."""
        if resource not in self._metrics._caches:  # noqa: SLF001 - the served kinds, the one place they are kept
            resource = UNKNOWN_RESOURCE
        key = (verb, resource, code)
        children = self._children.get(key)
        if children is None:
            m = self._metrics
            children = self._children[key] = (m.requests.labels(*key), m.latency.labels(*key))
        children[0].inc()
        if seconds is not None:
            children[1].observe(seconds)

    def _unary(self, verb: str, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        monotonic = self._metrics.clock.monotonic
        observe = self.observe

        async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            start = monotonic()
            try:
                return await behavior(request, context)
            finally:
                observe(verb, _resource(request), _code(context), monotonic() - start)

        return wrapped

    def _stream(self, verb: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
        observe = self.observe

        async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            try:
                async for item in behavior(request, context):
                    yield item
            finally:
                observe(verb, _resource(request), _code(context), None)

        return wrapped


def _resource(request: Any) -> str:
    return str(getattr(request, "resource", "") or UNKNOWN_RESOURCE)


def _code(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """The status the call ended with (OK when the handler returned normally)."""
    code = context.code()
    if code is None:
        return "CANCELLED" if context.cancelled() else "OK"
    if isinstance(code, grpc.StatusCode):
        return code.name
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status.name
    return str(code)


__all__ = ["ApiMetrics"]
