"""The wire side of the apiserver: gRPC method handlers around `ResourceService`, error mapping, watch streaming.

Watch responses are serialized once per change by the watch cache and handed to gRPC as bytes, so a change seen
by a thousand watchers is encoded once, not a thousand times.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc
import structlog
from google.protobuf.message import DecodeError

from caravanserai import meta, v1
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.apiserver.auth import Authenticator, Authorizer, Identity
from caravanserai.apiserver.kindrules import versions
from caravanserai.apiserver.limits import InflightLimiter
from caravanserai.apiserver.service import ResourceService
from caravanserai.apiserver.watchcache import WatcherClosed
from caravanserai.apiserver.watchfanout import selection
from caravanserai.errors import ApiError, FieldViolation, Forbidden, InternalError, Invalid
from caravanserai.grpcstatus import to_trailer
from caravanserai.text.selectors import FieldSelector, LabelSelector

log = structlog.get_logger(__name__)

Req = TypeVar("Req")
Context = grpc.aio.ServicerContext[Any, Any]
"""The servicer context of every method here (requests and responses are typed per method, not per context)."""
Handler = Callable[[Any, Context], Awaitable[Any]]
Method = Callable[..., Awaitable[Any]]
WrapHandler = Callable[[str, "grpc.RpcMethodHandler[Any, Any]"], "grpc.RpcMethodHandler[Any, Any]"]

CHUNK = 64 * 1024
WORKER_METADATA = "caravanserai-apiserver-worker"
"""Initial metadata of a Watch under `cara-apiserver --workers N`: the index of the worker serving it."""
MAX_DOWNLOAD = 64 * 1024 * 1024


# An error travels in metadata (the message in grpc-message, percent-encoded; the details in a base64 trailer).
# gRPC clients refuse metadata over 8 KiB by default (randomly between 8 and 16 KiB), which would turn a refusal
# naming many fields, or echoing a huge name, into RESOURCE_EXHAUSTED without any field. Both parts are capped
# so that even a message of multi-byte characters (x3 percent-encoded) stays under that limit.
MAX_ERROR_MESSAGE_BYTES = 1024
MAX_ERROR_DETAILS_BYTES = 2048  # field violations, in the status trailer
_MAX_FIELD_BYTES, _MAX_DESCRIPTION_BYTES = 256, 512


def _cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, ending in "…" when cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", "ignore") + "…"


def _left_out(violations: Sequence[FieldViolation]) -> int:
    """How many violations `violations` stand for: each one, except that a final `(more)` entry (as validation adds
    beyond its own limit) stands for the number it gives."""
    last = violations[-1]
    counted = re.match(r"(\d+) further", last.description) if last.field == "(more)" else None
    return len(violations) - 1 + (int(counted.group(1)) if counted else 1)


def _capped(err: ApiError) -> ApiError:
    """`err` small enough to reach any client: message cut, and field violations beyond the budget replaced by one
    `(more)` entry saying how many were left out."""
    message = _cut(err.message, MAX_ERROR_MESSAGE_BYTES)
    if isinstance(err, Invalid):
        kept: list[FieldViolation] = []
        budget = MAX_ERROR_DETAILS_BYTES - 64  # room for the "(more)" entry
        for i, violation in enumerate(err.violations):
            shown = FieldViolation(
                _cut(violation.field, _MAX_FIELD_BYTES), _cut(violation.description, _MAX_DESCRIPTION_BYTES)
            )
            budget -= len(shown.field.encode()) + len(shown.description.encode()) + 8  # + protobuf framing
            if kept and budget < 0:
                kept.append(FieldViolation("(more)", f"{_left_out(err.violations[i:])} further violations"))
                break
            kept.append(shown)
        return Invalid(message, kept)
    if message == err.message:
        return err
    capped = copy.copy(err)
    capped.message = message
    return capped


async def abort(context: Context, err: ApiError) -> None:
    """End the call with `err`'s status code, message and rich details, capped in size (see `_capped`)."""
    err = _capped(err)
    await context.abort(err.code, err.message, trailing_metadata=to_trailer(err))


class Undecodable:
    """Stands in for a request whose bytes are not a valid message (e.g. a string field that is not UTF-8)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _decoder(cls: Any) -> Callable[[bytes], Any]:
    """A request deserializer that never raises: bad bytes become `Undecodable`, refused as INVALID_ARGUMENT."""

    def decode(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except DecodeError as exc:
            return Undecodable(str(exc) or "malformed message")

    return decode


def _refuse_undecodable(request: Any) -> None:
    if isinstance(request, Undecodable):
        raise Invalid.of([FieldViolation("body", f"not a valid message: {request.reason}")], what="request")


def _unary(fn: Method) -> Method:
    """Turn ApiErrors raised by a servicer method into statuses; anything else is logged and INTERNAL."""

    @functools.wraps(fn)
    async def wrapper(self: ResourcesServicer, request: Any, context: Context) -> Any:
        try:
            _refuse_undecodable(request)
            who = self.authn.identify(context)
            client = self._client_key(who, context)
            self.limiter.admit(client)
            try:
                return await fn(self, request, context, who)
            finally:
                self.limiter.release(client)
        except ApiError as err:
            await abort(context, err)
        except Exception:
            log.exception("unexpected error", method=fn.__name__)
            await abort(context, InternalError("internal error; see the apiserver log"))

    return wrapper


class ResourcesServicer:
    """caravanserai.v1.Resources over `ResourceService`."""

    def __init__(
        self,
        service: ResourceService,
        *,
        bookmark_interval: float,
        authn: Authenticator | None = None,
        authz: Authorizer | None = None,
        limiter: InflightLimiter | None = None,
        worker: int | None = None,
    ) -> None:
        self._service = service
        # Under `--workers N`, every Watch first sends this worker's index (WORKER_METADATA), so a client (and a
        # test) can tell which worker holds its connection.
        self._worker_metadata = None if worker is None else ((WORKER_METADATA, str(worker)),)
        self._bookmark_interval = bookmark_interval
        self.authn = authn or Authenticator(client_certs=False)
        self.authz = authz or Authorizer(service.kinds)
        self.limiter = limiter or InflightLimiter()

    def _client_key(self, who: Identity, context: Context) -> str:
        """Whose share a request counts against: the identity when authenticated, else the connection."""
        return who.user if self.authn.enabled else (context.peer() or "unknown")

    @_unary
    async def Create(self, request: v1.CreateRequest, context: Context, who: Identity) -> v1.Object:
        way = await self._route(request.resource)
        obj = await self._service.create(way.resource, await way.incoming(request.object), who=who)
        return await way.outgoing(self._service.wrap(way.resource, obj))

    @_unary
    async def Get(self, request: v1.GetRequest, context: Context, who: Identity) -> v1.Object:
        way = await self._route(request.resource)
        obj = await self._service.get(way.resource, request.name, namespace=request.namespace, who=who)
        return await way.outgoing(self._service.wrap(way.resource, obj))

    @_unary
    async def List(self, request: v1.ListRequest, context: Context, who: Identity) -> v1.ListResponse | bytes:
        way = await self._route(request.resource)
        if way.version is None:
            return await self._service.list_bytes(request, who=who)  # assembled from stored bytes, sent as is
        stored = v1.ListRequest()
        stored.CopyFrom(request)
        stored.resource = way.resource
        return await way.outgoing_list(await self._service.list(stored, who=who))

    @_unary
    async def Update(self, request: v1.UpdateRequest, context: Context, who: Identity) -> v1.Object:
        way = await self._route(request.resource)
        obj = await self._service.update(way.resource, await way.incoming(request.object), who=who)
        return await way.outgoing(self._service.wrap(way.resource, obj))

    @_unary
    async def UpdateStatus(self, request: v1.UpdateRequest, context: Context, who: Identity) -> v1.Object:
        way = await self._route(request.resource)
        obj = await self._service.update_status(way.resource, await way.incoming(request.object), who=who)
        return await way.outgoing(self._service.wrap(way.resource, obj))

    @_unary
    async def Delete(self, request: v1.DeleteRequest, context: Context, who: Identity) -> v1.DeleteResponse:
        way = await self._route(request.resource)
        if way.version is None:
            return await self._service.delete(request, who=who)
        stored = v1.DeleteRequest()
        stored.CopyFrom(request)
        stored.resource = way.resource
        response = await self._service.delete(stored, who=who)
        if response.HasField("object"):
            response.object.CopyFrom(await way.outgoing(response.object))
        return response

    @_unary
    async def Authorize(self, request: v1.AccessRequest, context: Context, who: Identity) -> v1.AccessResponse:
        """May the caller (or, asked by an admin or a node, `request.user` with `request.groups`: a node's agent asks
        for the callers of its logs, exec and port-forward) do `request.verb` on `request.resource` (a kind's plural
        or a subresource, `meta.SUBRESOURCES`)? The same decision `check` makes for a request (an object's own
        state, such as a project's node, is not known here). Anyone else asks about themselves only."""
        subject = who
        if request.user and request.user != who.user:
            if not (who.is_admin or who.node is not None):
                raise Forbidden(f"{who.user} may not ask what another user may do (only an admin may use --as)")
            subject = Identity(request.user, frozenset(request.groups))
        base, slash, _ = request.resource.partition("/")
        if slash and request.resource not in meta.SUBRESOURCES:
            known = ", ".join(meta.SUBRESOURCES)
            raise Invalid.of([FieldViolation("resource", f"{request.resource!r} is not a subresource: {known}")])
        strategy = await self._service.strategy(base)
        namespace = "" if strategy.kind.cluster_scoped else request.namespace
        decision = self.authz.decide(subject, request.verb, request.resource, namespace=namespace, name=request.name)
        return v1.AccessResponse(allowed=decision.allowed, reason=decision.reason)

    async def _route(self, resource: str) -> versions.Route:
        """The stored resource a request's resource names (`<plural>.<version>.<group>`: a further version)."""
        return await versions.route(resource, self._service.strategy)

    async def Watch(self, request: v1.WatchRequest, context: Context) -> AsyncIterator[bytes]:
        try:
            _refuse_undecodable(request)
            who = self.authn.identify(context)
            way = await self._route(request.resource)
            resource = way.resource
            cache = await self._service.watch_cache(resource)
            namespace = "" if cache.kind.cluster_scoped else request.namespace
            self.authz.check(who, "watch", resource, field_selector=request.field_selector, namespace=namespace)
            labels = LabelSelector.parse(request.label_selector)
            fields = FieldSelector.parse(request.field_selector, kind=cache.kind.kind)
            if namespace:
                fields = fields.also("metadata.namespace", namespace)
            await cache.ready.wait()

            visible = self.authz.visible(who, self._service.kinds.require(resource))
            watcher = cache.watch(
                selection(labels, fields, visible), resource_version=request.resource_version, index=fields.equality
            )
        except ApiError as err:
            await abort(context, err)
            return
        timeout = self._bookmark_interval if request.allow_bookmarks else None
        if self._worker_metadata is not None:
            await context.send_initial_metadata(self._worker_metadata)
        try:
            while True:
                data = await watcher.next(timeout=timeout)
                yield await way.outgoing_event(watcher.bookmark() if data is None else data)
        except WatcherClosed as closed:
            code = grpc.StatusCode.UNAVAILABLE if "shutting down" in str(closed) else grpc.StatusCode.RESOURCE_EXHAUSTED
            await context.abort(code, f"watch closed: {closed}; resume from your last resource version")
        finally:
            watcher.close("client went away")

    def handler(self, wrap: WrapHandler | None = None) -> grpc.GenericRpcHandler:
        """The generic handler of the service; `wrap(verb, handler)`, when given, wraps each method's handler once
        (the metrics count and time calls this way, without a per-call interceptor)."""

        def unary(fn: Handler, req: Any, resp: Any) -> grpc.RpcMethodHandler[Any, Any]:
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=_decoder(req), response_serializer=_serialize
            )

        methods = {
            "Create": unary(self.Create, v1.CreateRequest, v1.Object),
            "Get": unary(self.Get, v1.GetRequest, v1.Object),
            "List": unary(self.List, v1.ListRequest, v1.ListResponse),
            "Update": unary(self.Update, v1.UpdateRequest, v1.Object),
            "UpdateStatus": unary(self.UpdateStatus, v1.UpdateRequest, v1.Object),
            "Delete": unary(self.Delete, v1.DeleteRequest, v1.DeleteResponse),
            "Authorize": unary(self.Authorize, v1.AccessRequest, v1.AccessResponse),
            "Watch": grpc.unary_stream_rpc_method_handler(
                self.Watch, request_deserializer=_decoder(v1.WatchRequest), response_serializer=_identity
            ),
        }
        if wrap is not None:
            methods = {verb: wrap(verb, handler) for verb, handler in methods.items()}
        return grpc.method_handlers_generic_handler("caravanserai.v1.Resources", methods)


def _serialize(reply: Any) -> bytes:
    """A reply message serialized, or a reply already serialized (a List assembled from stored bytes) as it is."""
    return reply if isinstance(reply, bytes) else bytes(reply.SerializeToString())


def _identity(data: bytes) -> bytes:
    return data


class NetworkServicer(api_pb2_grpc.NetworkServicer):
    """caravanserai.v1.Network: byte streams for agents' throughput measurements (any authenticated caller)."""

    def __init__(self, authn: Authenticator) -> None:
        self._authn = authn

    async def _identify(self, context: Context) -> None:
        try:
            self._authn.identify(context)
        except ApiError as err:
            await abort(context, err)

    async def Download(self, request: api_pb2.DownloadRequest, context: Context) -> AsyncIterator[api_pb2.Chunk]:
        await self._identify(context)
        remaining = min(max(0, request.size), MAX_DOWNLOAD)
        block = bytes(CHUNK)
        while remaining > 0:
            n = min(CHUNK, remaining)
            yield api_pb2.Chunk(data=block[:n])
            remaining -= n

    async def Upload(self, request_iterator: AsyncIterator[api_pb2.Chunk], context: Context) -> api_pb2.UploadSummary:
        await self._identify(context)
        received = 0
        async for chunk in request_iterator:
            received += len(chunk.data)
        return api_pb2.UploadSummary(received=received)


__all__ = ["WORKER_METADATA", "NetworkServicer", "ResourcesServicer", "abort"]
