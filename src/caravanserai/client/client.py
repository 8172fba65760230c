"""`Client` and the typed per-kind `ResourceClient`.

Guarantees:

* gRPC errors become `caravanserai.errors` exceptions (mapped in `caravanserai.grpcstatus`), raised `from` the gRPC
  error; nothing from grpc leaks to callers.
* RESOURCE_EXHAUSTED (refused for load before any work) is retried after the server's advice, for every call.
* UNAVAILABLE is retried with jittered exponential backoff (25–75 ms doubling to 1–3 s, for up to `retry_timeout`
  seconds of the client's clock) in two cases:

  - **The call provably never reached a server**, for every verb (Create and Delete included): gRPC failed it
    while connecting, before a byte of it was sent: no connection could be made (connection refused, no route,
    TLS handshake refused, name not resolved) so no channel was ready. gRPC says so with the details "failed to
    connect to all addresses" (or "Connection refused"); see `never_sent`.
  - **The call is safe to repeat** whatever happened to it: Get, List, Watch start, and writes guarded by a
    resource_version (Update, UpdateStatus, and Delete with a version).

  An ambiguous failure after sending (the connection dropped or the deadline passed while the call was in flight,
  the server stopped mid-call) of a Delete without a version is raised, not repeated: the server may have carried
  it out. Create is exact instead: it proposes the object's uid, and after an ambiguous failure looks the object
  up and recognises its own by that uid (see `ResourceClient.create`), so a failover never surfaces as an error.
* **A retry waits for the server, not for the backoff** (`retry_pause`, also used by every resumable watch): when
  the channel has lost its connection, the wait ends as soon as gRPC has a ready connection again (it reconnects
  within `grpc.max_reconnect_backoff_ms`, 2 s); the backoff is slept out in full only while the channel stays
  connected, i.e. for a server that answers with errors.
* `watch()` is one raw stream: it ends (raises) when the server goes away. `caravanserai.informer` builds the
  resuming list+watch on top of it.
* **Namespaces.** A `ResourceClient` of a namespaced kind is bound to a namespace (`client.resource(kind,
  namespace=...)`) or not (`client.projects`). Get and Delete take a name, looked up in the bound namespace, else
  in the client's `namespace` (default "default"), or a key "namespace/name" (what informers and work queues
  hold); Create puts an object that names no namespace into the bound one, else the client's. List and Watch of
  an unbound client span every namespace; a bound one's, only its own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

import grpc

from caravanserai import meta, v1
from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.backoff import Backoff
from caravanserai.client import definitions
from caravanserai.client.targets import DEFAULT_SERVER, channel_options, channel_target, server_address
from caravanserai.clock import Clock, SystemClock
from caravanserai.customkinds.schemas import KindNames
from caravanserai.errors import AlreadyExists, NotFound, ResourceExhausted, Unavailable
from caravanserai.grpcstatus import from_rpc_error
from caravanserai.process.tls import TLSFiles

T = TypeVar("T")  # the message class of a kind: v1.Project …, or a custom kind's generated class
R = TypeVar("R")
# Retries of UNAVAILABLE: 25–75 ms, doubling to 1–3 s (jitter spreads the clients of one restarted server).
RETRY_BACKOFF = Backoff(initial=0.025, cap=1.0, jitter=2.0, reset_after=None)


@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """One change seen by a watch (the typed form of the wire message `v1.WatchEvent`): type is ADDED, MODIFIED,
    DELETED or BOOKMARK (then only object.metadata.resource_version)."""

    type: str
    object: T


@dataclass(frozen=True, slots=True)
class ObjectList(Generic[T]):
    """A list result: the items, the snapshot version to watch from, and the next page's token."""

    items: list[T]
    resource_version: str
    continue_token: str = ""

    def __iter__(self) -> Any:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


class Client:
    """A connection to the API. Use as `async with Client(address) as c:`; `await c.close()` otherwise.

    `target` is one `host:port` or a comma-separated list of servers; with several, calls go to the servers that
    are up and fail over between them (`caravanserai.client.targets`). `own_connection`: this client's channel
    opens connections of its own instead of sharing those of other clients of this process to the same target
    (gRPC's default); several such clients of `cara-apiserver --workers N` spread over its workers.
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        tls: TLSFiles | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        retry_timeout: float = 30.0,
        clock: Clock | None = None,
        own_connection: bool = False,
        namespace: str = meta.DEFAULT_NAMESPACE,
    ) -> None:
        self.target = server_address(target)
        self.namespace = namespace or meta.DEFAULT_NAMESPACE  # where names without a namespace are looked up
        self.clock: Clock = clock or SystemClock()
        self.timeout = timeout
        self.retry_timeout = retry_timeout
        options = channel_options(own_connection=own_connection)
        if credentials is None and tls is not None and tls.enabled:
            credentials = tls.channel_credentials()
        # TLS without a certificate or a token: a server that requires client certificates closes the handshake
        self.without_certificate = tls is not None and tls.enabled and not tls.cert and not token
        channel = channel_target(self.target)  # several servers: one channel balancing over all of them
        options.extend(channel.options)
        if credentials is not None:
            self.channel = grpc.aio.secure_channel(channel.target, credentials, options=options)
        else:
            self.channel = grpc.aio.insecure_channel(channel.target, options=options)
        self._metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        self.stub = api_pb2_grpc.ResourcesStub(self.channel)
        self.network = api_pb2_grpc.NetworkStub(self.channel)
        self.projects: ResourceClient[v1.Project] = ResourceClient(self, "projects")
        self.nodes: ResourceClient[v1.Node] = ResourceClient(self, "nodes")
        self.leases: ResourceClient[v1.Lease] = ResourceClient(self, "leases")
        self.events: ResourceClient[v1.Event] = ResourceClient(self, "events")
        self.resourcedefinitions: ResourceClient[v1.ResourceDefinition] = ResourceClient(self, "resourcedefinitions")
        self.secrets: ResourceClient[v1.Secret] = ResourceClient(self, "secrets")
        self.configs: ResourceClient[v1.Config] = ResourceClient(self, "configs")
        self.backuprepositories: ResourceClient[v1.BackupRepository] = ResourceClient(self, "backuprepositories")
        self.admissionpolicies: ResourceClient[v1.AdmissionPolicy] = ResourceClient(self, "admissionpolicies")
        self.nodegroups: ResourceClient[v1.NodeGroup] = ResourceClient(self, "nodegroups")
        self.projectsets: ResourceClient[v1.ProjectSet] = ResourceClient(self, "projectsets")
        self.namespaces: ResourceClient[v1.Namespace] = ResourceClient(self, "namespaces")

    @overload
    def resource(self, kind: str, *, namespace: str | None = None) -> ResourceClient[Any]: ...

    @overload
    def resource(self, kind: type[T], *, namespace: str | None = None) -> ResourceClient[T]: ...

    def resource(self, kind: str | type[T], *, namespace: str | None = None) -> ResourceClient[Any]:
        """The typed client of a kind: by message class (`v1.Project`, or a custom kind's generated class once
        `define`d or registered with `caravanserai.customkinds.schemas.register`), or by plural, singular or short name
        ("projects", "project", "p"; custom kinds once known to this process, see `discover`). `namespace` binds a
        namespaced kind's client to one namespace (ignored for a cluster-wide kind)."""
        found = meta.kind_for(kind) if isinstance(kind, str) else meta.kind_of_class(kind)
        return ResourceClient(self, found, namespace=namespace)

    async def define(
        self,
        cls: type[T],
        *,
        spec: type[Any],
        status: type[Any],
        group: str,
        plural: str = "",
        short_names: Sequence[str] = (),
        printer_columns: Sequence[tuple[str, str]] = (),
        node_verbs: Sequence[str] = (),
        namespaced: bool = False,
        timeout: float = 10.0,
    ) -> v1.ResourceDefinition:
        """Define (or update) the custom kind of the generated class `cls` with its `spec` and `status` classes
        (`namespaced`: its objects live in namespaces, as Projects do; the scope cannot change later),
        register it in this process and wait (up to `timeout` seconds) until the server serves it. Idempotent;
        an incompatible schema change is refused (Invalid naming the field). Returns the stored definition."""
        names = KindNames.of(
            cls,
            group=group,
            plural=plural,
            short_names=short_names,
            printer_columns=printer_columns,
            node_verbs=node_verbs,
            namespaced=namespaced,
        )
        return await definitions.define(
            self.resourcedefinitions,
            cls,
            names,
            spec=spec,
            status=status,
            list_one=self._list_one,
            clock=self.clock,
            timeout=timeout,
        )

    async def register(
        self,
        cls: type[T],
        *,
        spec: type[Any],
        status: type[Any],
        group: str,
        plural: str = "",
        timeout: float = 10.0,
    ) -> v1.ResourceDefinition:
        """What an operator calls at start: check that the definition the deployment installed (`caractrl apply -f`
        or `caractrl define`) is compatible with the generated class `cls` (and its `spec` and `status` classes),
        register the kind in this process with the served names and printer columns, and wait (up to `timeout`
        seconds) until the server serves it. Never writes the definition, so an older build runs against a newer
        definition (fields it does not know are kept on update). Raises `DefinitionMissing` when no definition of
        the kind is served, `IncompatibleDefinition` (naming each field) when a field of the classes is missing,
        renamed, retyped or retired in the served schema. Returns the served definition."""
        names = KindNames.of(cls, group=group, plural=plural)
        return await definitions.register(
            self.resourcedefinitions,
            cls,
            names,
            spec=spec,
            status=status,
            list_one=self._list_one,
            clock=self.clock,
            timeout=timeout,
        )

    async def can_i(
        self,
        verb: str,
        resource: str,
        *,
        namespace: str | None = None,
        name: str = "",
        user: str = "",
        groups: Sequence[str] = (),
    ) -> v1.AccessResponse:
        """Whether this client's identity (or, for an admin or a node, `user` with `groups`) may do `verb` on
        `resource` (a plural, singular or short name, or a subresource such as `projects/log`) in `namespace`
        (None: the client's; "": every namespace) — answered by the apiserver's own authorizer, with the reason
        (`caractrl auth can-i`). KeyError for a kind or subresource this process does not know."""
        kind = meta.kind_for(resource.partition("/")[0])
        request = v1.AccessRequest(
            verb=verb,
            resource=meta.subresource_for(resource) if "/" in resource else kind.plural,
            namespace="" if kind.cluster_scoped else self.namespace if namespace is None else namespace,
            name=name,
            user=user,
            groups=list(groups),
        )
        response: v1.AccessResponse = await self.call(self.stub.Authorize, request, retry=True)
        return response

    async def _list_one(self, kind: meta.Kind) -> object:
        return await self.resource(kind.cls).list(limit=1)

    async def discover(self) -> list[meta.Kind]:
        """Register every custom kind the server serves (classes built from the definitions' schemas, unless a
        class of that kind is already registered) so that names like "webfarms" work; the kinds found."""
        return await definitions.discover(self.resourcedefinitions)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def call(self, method: Callable[..., Awaitable[R]], request: Any, *, retry: bool) -> R:
        """Invoke a unary method, mapping errors and retrying UNAVAILABLE when `retry`."""
        deadline = self.clock.monotonic() + self.retry_timeout
        backoff = RETRY_BACKOFF.start(self.clock)
        while True:
            try:
                return await method(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.aio.AioRpcError as exc:
                err = from_rpc_error(exc, target=self.target, without_certificate=self.without_certificate)
                # Refused for load before any work was done: always safe to repeat, after the server's advice.
                wait = err.retry_after if isinstance(err, ResourceExhausted) else None
                unsent = isinstance(err, Unavailable) and (retry or never_sent(exc))
                retryable = unsent or wait is not None
                delay = backoff.next_delay()  # grows on every retry, also those paused by the server's advice
                pause = wait if wait is not None else delay
                if not retryable or self.clock.monotonic() + pause >= deadline:
                    raise err from exc
            if wait is not None:
                await self.clock.sleep(pause)  # the server's advice is honoured in full
            elif await self.retry_pause(pause):
                backoff.reset()

    def connected(self) -> bool:
        """Whether the channel has a ready connection to a server now."""
        return self.channel.get_state() == grpc.ChannelConnectivity.READY

    async def retry_pause(self, delay: float, *, clock: Clock | None = None) -> bool:
        """Wait `delay` seconds of `clock` (default: the client's) before a retry, or less: if the channel loses its
        connection (or has none now), return as soon as it has a ready one again. True when a reconnect ended the
        wait (the caller may then reset its backoff: its failures were the outage, not the server's answers)."""
        sleeping = asyncio.ensure_future((clock or self.clock).sleep(delay))
        reconnected = asyncio.ensure_future(self._reconnected())
        try:
            await asyncio.wait({sleeping, reconnected}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeping, reconnected):
                task.cancel()
            await asyncio.gather(sleeping, reconnected, return_exceptions=True)
        return reconnected.done() and not reconnected.cancelled() and reconnected.exception() is None

    async def _reconnected(self) -> None:
        """Return once the channel, having lost its connection (now or later), has a ready one again. Asks gRPC
        to connect whenever the channel is idle. Never returns while the connection holds."""
        state = self.channel.get_state(try_to_connect=True)
        lost = state != grpc.ChannelConnectivity.READY
        while not (lost and state == grpc.ChannelConnectivity.READY):
            await self.channel.wait_for_state_change(state)
            state = self.channel.get_state(try_to_connect=True)
            lost = lost or state != grpc.ChannelConnectivity.READY

    async def open_stream(self, method: Callable[..., Any], request: Any, *, timeout: float | None = None) -> Any:
        """Start a server-streaming call; returns the call object once the stream is open."""
        return method(request, timeout=timeout, metadata=self._metadata)


# How gRPC words the failure of a call it could not send: the channel had no ready connection and connecting
# failed ("failed to connect to all addresses; last error: … Connection refused"; newer load-balancing policies say
# "connections to all backends failing"). Failures of a call in flight read differently ("Socket closed",
# "Connection reset by peer", "Deadline Exceeded", "GOAWAY received").
_NEVER_SENT = ("failed to connect to all addresses", "connections to all backends failing", "connection refused")


def never_sent(exc: grpc.aio.AioRpcError) -> bool:
    """True when `exc` proves the call never reached a server (UNAVAILABLE while connecting), so repeating it
    cannot do anything twice."""
    if exc.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    details = (exc.details() or "").lower()
    return any(marker in details for marker in _NEVER_SENT)


class ResourceClient(Generic[T]):
    """Typed verbs on one kind. Returned objects are fresh messages the caller owns."""

    def __init__(self, client: Client, kind: str | meta.Kind, *, namespace: str | None = None) -> None:
        self._client = client
        self.kind = meta.kind_for(kind) if isinstance(kind, str) else kind
        self.resource = self.kind.plural
        # The bound namespace (None: unbound; always None for a cluster-wide kind).
        self.namespace = None if self.kind.cluster_scoped else namespace

    def in_namespace(self, namespace: str) -> ResourceClient[T]:
        """This kind's client bound to `namespace`."""
        return ResourceClient(self._client, self.kind, namespace=namespace)

    def _locate(self, name: str) -> tuple[str, str]:
        """(namespace, name) of a name or key: a key's namespace, else the bound one, else the client's ("" for a
        cluster-wide kind)."""
        if self.kind.cluster_scoped:
            return "", name
        namespace, name = meta.split_key(name)
        return namespace or self.namespace or self._client.namespace, name

    def _listed_namespace(self, namespace: str | None) -> str:
        if self.kind.cluster_scoped:
            return ""
        return namespace if namespace is not None else self.namespace or ""

    @property
    def client(self) -> Client:
        """The connection this resource client calls through."""
        return self._client

    def _unwrap(self, envelope: v1.Object) -> T:
        obj: T = self.kind.unwrap(envelope)
        return obj

    async def create(self, obj: T) -> T:
        """Create `obj`; returns it as stored (uid, version, defaults). AlreadyExists when the name is taken.

        Exactly once, also across failovers: the request carries a uid of its own (`obj`'s, else a fresh one; the
        server keeps a proposed uid). Repeated while the server cannot be reached (the call never left); after an
        ambiguous failure (the connection dropped while the call was in flight) the object is looked up: stored
        with our uid means the lost attempt succeeded, absent means it is created again, stored with another uid
        is AlreadyExists. Gives up (raising Unavailable) after `retry_timeout`."""
        sent: Any = type(obj)()  # a copy: the caller's object is not changed
        sent.CopyFrom(obj)
        sent.metadata.uid = sent.metadata.uid or str(uuid.uuid4())
        if not self.kind.cluster_scoped and not sent.metadata.namespace:
            sent.metadata.namespace = self.namespace or self._client.namespace
        request = v1.CreateRequest(resource=self.resource, object=self.kind.wrap(sent))
        try:
            return self._unwrap(await self._client.call(self._client.stub.Create, request, retry=False))
        except Unavailable as exc:
            key = meta.join_key(sent.metadata.namespace, sent.metadata.name)
            return await self._create_after_ambiguity(request, key, sent.metadata.uid, exc)

    async def _create_after_ambiguity(self, request: v1.CreateRequest, name: str, uid: str, error: Unavailable) -> T:
        clock = self._client.clock
        deadline = clock.monotonic() + self._client.retry_timeout
        backoff = RETRY_BACKOFF.start(clock)
        while clock.monotonic() < deadline:
            await self._client.retry_pause(backoff.next_delay())
            try:
                stored = await self.get(name)
            except NotFound:
                try:
                    return self._unwrap(await self._client.call(self._client.stub.Create, request, retry=False))
                except (Unavailable, AlreadyExists):
                    continue  # lost again, or the first attempt landed meanwhile: look again
            except Unavailable:
                continue
            if getattr(stored, "metadata").uid == uid:
                return stored
            raise AlreadyExists(f"{self.kind.kind} {name} already exists")
        raise error

    async def get(self, name: str) -> T:
        """The current object (a linearizable read) of a name or a key "namespace/name". NotFound when absent."""
        namespace, name = self._locate(name)
        request = v1.GetRequest(resource=self.resource, name=name, namespace=namespace)
        return self._unwrap(await self._client.call(self._client.stub.Get, request, retry=True))

    async def list(
        self,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        namespace: str | None = None,
    ) -> ObjectList[T]:
        """Objects matching the selectors, read from one snapshot; `resource_version` is that snapshot's version.
        Of `namespace` when given, else of the bound namespace, else of every namespace ("" = every namespace).

        With `limit`, one page: pass `continue_token` of the result to get the next (same snapshot).
        """
        request = v1.ListRequest(
            resource=self.resource,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            namespace=self._listed_namespace(namespace),
        )
        setattr(request, "continue", continue_token)
        response: v1.ListResponse = await self._client.call(self._client.stub.List, request, retry=True)
        items = [self._unwrap(o) for o in response.items]
        return ObjectList(items, response.resource_version, getattr(response, "continue"))

    async def update(self, obj: T) -> T:
        """Store new metadata and spec. `obj.metadata.resource_version` must be the version read (Conflict)."""
        request = v1.UpdateRequest(resource=self.resource, object=self.kind.wrap(obj))
        return self._unwrap(await self._client.call(self._client.stub.Update, request, retry=True))

    async def update_status(self, obj: T) -> T:
        """Store a new status (phase transitions are checked). Requires the version read (Conflict)."""
        request = v1.UpdateRequest(resource=self.resource, object=self.kind.wrap(obj))
        return self._unwrap(await self._client.call(self._client.stub.UpdateStatus, request, retry=True))

    async def delete(
        self, name: str, *, force: bool = False, resource_version: str = "", propagation_policy: str = ""
    ) -> v1.DeleteResponse:
        """Delete (active projects become Terminating first; `force` removes at once). `.deleted` says whether
        the record is gone; `.object` holds its last state.

        `propagation_policy` says what becomes of the object's dependents (objects whose ownerReferences name it):
        "Background" (default: the garbage collector deletes them after the object), "Foreground" (the object
        stays, marked, until the collector has deleted every dependent with blockOwnerDeletion) or "Orphan" (the
        dependents stay, without the reference). Constants: `caravanserai.meta.PROPAGATION_*`.

        Without `resource_version` the server deletes whatever is there (never Conflict). Repeated while the
        server cannot be reached; after an ambiguous failure repeated only when `resource_version` is given."""
        namespace, name = self._locate(name)
        request = v1.DeleteRequest(
            resource=self.resource,
            name=name,
            namespace=namespace,
            force=force,
            resource_version=resource_version,
            propagation_policy=propagation_policy,
        )
        return await self._client.call(self._client.stub.Delete, request, retry=bool(resource_version))

    async def watch(
        self,
        *,
        resource_version: str = "",
        label_selector: str = "",
        field_selector: str = "",
        allow_bookmarks: bool = True,
        namespace: str | None = None,
    ) -> AsyncIterator[Change[T]]:
        """Changes after `resource_version` ("" = from now, "0" = current objects as ADDED first), in order; of the
        namespace chosen as `list` chooses it.

        Raises Expired when the version is too old (list again), Unavailable when the stream breaks.
        """
        request = v1.WatchRequest(
            resource=self.resource,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            allow_bookmarks=allow_bookmarks,
            namespace=self._listed_namespace(namespace),
        )
        call = await self._client.open_stream(self._client.stub.Watch, request)
        try:
            async for event in call:
                yield Change(event.type, self._unwrap(event.object))
        except grpc.aio.AioRpcError as exc:
            c = self._client
            raise from_rpc_error(exc, target=c.target, without_certificate=c.without_certificate) from exc
        finally:
            call.cancel()


__all__ = ["DEFAULT_SERVER", "Change", "Client", "ObjectList", "ResourceClient", "never_sent", "server_address"]
