"""Assembly of the apiserver: the store, one watch cache per kind, the gRPC server, health and compaction.

`ApiServer.run()` returns only when cancelled; on cancellation it stops accepting calls, gives in-flight calls
`grace` seconds, closes watches and the etcd client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
import structlog

from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.apiserver import namespaces
from caravanserai.apiserver.auth import Authenticator, Authorizer, load_token_file
from caravanserai.apiserver.definitions import DefinitionServer
from caravanserai.apiserver.eventleases import EventLeases
from caravanserai.apiserver.grpcapi import NetworkServicer, ResourcesServicer
from caravanserai.apiserver.httpendpoint import MetricsEndpoint
from caravanserai.apiserver.kinds import builtin_kinds, nodegraph, rbacdefaults
from caravanserai.apiserver.limits import InflightLimiter
from caravanserai.apiserver.metrics import ApiMetrics
from caravanserai.apiserver.rbac import RoleIndex
from caravanserai.apiserver.service import ResourceService
from caravanserai.apiserver.watchcache import WatchCache
from caravanserai.apiserver.watchhistory import HistoryBudget
from caravanserai.clock import Clock, SystemClock
from caravanserai.errors import ApiError
from caravanserai.process.introspection import serve_introspection, set_serving
from caravanserai.process.tls import TLSFiles
from caravanserai.storage import EtcdClient, Store
from caravanserai.storage.compaction import Compactor
from caravanserai.storage.encryption import Encryption, load_key_file
from caravanserai.storage.etcd_errors import NO_SPACE_MESSAGE, no_space_alarm
from caravanserai.text.addresses import is_loopback

log = structlog.get_logger(__name__)

MAX_MESSAGE_BYTES = 3 * 1024 * 1024
SERVICES = ("caravanserai.v1.Resources", "caravanserai.v1.Network")


@dataclass
class ApiServerConfig:
    """Settings of one apiserver process (flags of cara-apiserver)."""

    etcd_endpoints: Sequence[str] = ("http://127.0.0.1:2379",)
    etcd_prefix: str = "/caravanserai"
    listen: str = "127.0.0.1:7420"
    bookmark_interval: float = 10.0
    compaction_interval: float = 300.0  # 0 disables compaction (storage/compaction.py: coordinated, 1 interval kept)
    history_revisions: int = 10_000
    history_kind_bytes: int = 256 * 1024 * 1024  # estimated bytes of one kind's watch history (oldest dropped)
    history_bytes: int = 1024 * 1024 * 1024  # the same, of every kind's history together
    grace: float = 5.0
    shutdown_delay: float = 0.0  # seconds served NOT_SERVING after SIGTERM before new calls are refused (handover)
    tls: TLSFiles = field(default_factory=TLSFiles)
    etcd_tls: TLSFiles = field(default_factory=TLSFiles)  # client certificate and CA for https:// etcd endpoints
    token_file: str = ""
    token_listen: str = ""  # optional second TLS port without client certificates, for bearer-token clients
    encryption_key_file: str = (
        ""  # keys encrypting Secrets in etcd (storage/encryption.py); "" stores them in the clear
    )
    allow_insecure: bool = False  # plain TCP on a non-loopback address
    max_inflight: int = 400
    max_inflight_per_client: int = 100
    metrics_listen: str = (
        ""  # host:port of /metrics, /healthz, /readyz; "" or "off": none (the CLI's default is 127.0.0.1:7423)
    )
    server_options: list[tuple[str, object]] = field(default_factory=list)
    worker: int | None = None  # the index of this process among `cara-apiserver --workers N` (None: no supervisor)


def _encryption(cfg: ApiServerConfig) -> Encryption | None:
    """The encryption of Secrets at rest configured by `cfg` (None: stored in the clear)."""
    if not cfg.encryption_key_file:
        return None
    confidential = [strategy.plural for strategy in builtin_kinds() if strategy.confidential]
    return Encryption(load_key_file(cfg.encryption_key_file), resources=confidential)


class ApiServer:
    """One apiserver. `port` is known once `started` is set (useful with listen port 0)."""

    def __init__(self, config: ApiServerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.port = 0
        self.started = asyncio.Event()
        self.service: ResourceService | None = None
        self.metrics = ApiMetrics(clock=self.clock)
        self.metrics_port = 0  # the port of /metrics once started (0: not serving)
        self._endpoint: MetricsEndpoint | None = None
        self._etcd: EtcdClient | None = None

    async def run(self) -> None:
        cfg = self.config
        etcd_tls = cfg.etcd_tls if cfg.etcd_tls.enabled else None
        async with EtcdClient(list(cfg.etcd_endpoints), tls=etcd_tls) as etcd:
            self._etcd = etcd
            store = self.metrics.instrument(Store(etcd, prefix=cfg.etcd_prefix, encryption=_encryption(cfg)))
            kinds = builtin_kinds()
            await namespaces.prepare(store, kinds, now=self.clock.now())
            await rbacdefaults.ensure_defaults(store, now=self.clock.now())
            budget = HistoryBudget(cfg.history_bytes)
            caches = {
                k.plural: WatchCache(
                    store,
                    k.kind,
                    decoded=k.cache_decoded,
                    history_revisions=cfg.history_revisions,
                    history_bytes=cfg.history_kind_bytes,
                    history_budget=budget,
                )
                for k in kinds
            }
            authorizer = Authorizer(
                kinds,
                graph=nodegraph.over(caches),
                terminating=namespaces.terminating(caches[namespaces.RESOURCE]),
                roles=RoleIndex(caches),
            )
            self.service = ResourceService(
                store,
                kinds,
                caches,
                clock=self.clock,
                event_leases=EventLeases(store, clock=self.clock),
                authorizer=authorizer,
            )
            server = self._build_server(self.service)
            self.metrics.watch_caches(caches, self.limiter)
            definitions = DefinitionServer(
                self.service,
                store,
                history_revisions=cfg.history_revisions,
                history_bytes=cfg.history_kind_bytes,
                history_budget=budget,
            )
            async with asyncio.TaskGroup() as group:
                background = [group.create_task(c.run(), name=f"watchcache-{c.resource}") for c in caches.values()]
                background.append(group.create_task(definitions.run(), name="definitions"))
                if cfg.compaction_interval > 0:
                    compactor = Compactor(
                        etcd,
                        compact=store.compact,
                        prefix=cfg.etcd_prefix,
                        interval=cfg.compaction_interval,
                        clock=self.clock,
                        on_compacted=budget.forget_before,
                    )
                    background.append(group.create_task(compactor.run(), name="compaction"))
                try:
                    await self._serve(server, caches, definitions.synced)
                finally:
                    for cache in list(caches.values()):
                        cache.close("apiserver shutting down")
                    await server.stop(cfg.grace)
                    for task in background:  # the loops end with the server
                        task.cancel()

    def _build_server(self, service: ResourceService) -> grpc.aio.Server:
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5000),
            *self.config.server_options,
        ]
        cfg = self.config
        # Only the workers of one supervisor share the listening address; gRPC turns SO_REUSEPORT on by default,
        # which would let a second apiserver on the same port silently take half of the connections.
        options.append(("grpc.so_reuseport", 1 if cfg.worker is not None else 0))
        server = grpc.aio.server(options=options)
        tokens = load_token_file(cfg.token_file) if cfg.token_file else {}
        if cfg.token_listen and not (cfg.tls.enabled and tokens):
            raise ValueError("--token-listen needs --tls-cert/--tls-key and --token-file")
        authn = Authenticator(client_certs=bool(cfg.tls.ca), tokens=tokens)
        self.limiter = InflightLimiter(total=cfg.max_inflight, per_client=cfg.max_inflight_per_client)
        servicer = ResourcesServicer(
            service,
            bookmark_interval=cfg.bookmark_interval,
            authn=authn,
            authz=service.authorizer,
            limiter=self.limiter,
            worker=cfg.worker,
        )
        server.add_generic_rpc_handlers((servicer.handler(self.metrics.wrap_handler),))
        api_pb2_grpc.add_NetworkServicer_to_server(NetworkServicer(authn), server)
        try:
            self._add_ports(server)
        except RuntimeError:  # grpc's "Failed to bind": the port is taken (SO_REUSEPORT is off, above)
            raise OSError(
                f"cannot listen on {cfg.listen}: the address is already in use (by another process; only the "
                "workers of one cara-apiserver --workers N share a port)"
            ) from None
        if self.port == 0:
            raise OSError(f"cannot listen on {self.config.listen}")
        self._endpoint = MetricsEndpoint(
            self._exposition, ready=self._readiness, listen=cfg.metrics_listen, allow_insecure=cfg.allow_insecure
        )
        return server

    def _add_ports(self, server: grpc.aio.Server) -> None:
        cfg = self.config
        if cfg.tls.enabled:
            self.port = server.add_secure_port(cfg.listen, cfg.tls.server_credentials())
            if cfg.token_listen:
                plain_tls = TLSFiles(cert=cfg.tls.cert, key=cfg.tls.key)
                if not server.add_secure_port(cfg.token_listen, plain_tls.server_credentials()):
                    raise OSError(f"cannot listen on {cfg.token_listen}")
        elif is_loopback(cfg.listen) or cfg.allow_insecure:
            self.port = server.add_insecure_port(cfg.listen)
        else:
            raise ValueError(
                f"refusing plain TCP on {cfg.listen}: give --tls-cert/--tls-key/--tls-ca, or --allow-insecure"
            )

    async def _serve(self, server: grpc.aio.Server, caches: dict[str, WatchCache], definitions: asyncio.Event) -> None:
        health_servicer = await serve_introspection(server, SERVICES)
        endpoint = self._endpoint
        assert endpoint is not None, "_build_server makes it"
        await endpoint.start()
        try:
            self.metrics_port = endpoint.port
            await server.start()
            await asyncio.gather(*(c.ready.wait() for c in list(caches.values())))
            await definitions.wait()  # custom kinds stored before the start are served from the first request on
            await asyncio.gather(*(c.ready.wait() for c in list(caches.values())))
            await set_serving(health_servicer, SERVICES)
            log.info(
                "apiserver serving",
                listen=self.config.listen,
                port=self.port,
                metrics_port=self.metrics_port,
                etcd=list(self.config.etcd_endpoints),
            )
            self.started.set()
            try:
                await server.wait_for_termination()
            finally:
                await health_servicer.enter_graceful_shutdown()
                await self._keep_serving_while_clients_leave()
        finally:
            await endpoint.close()

    async def _keep_serving_while_clients_leave(self) -> None:
        """On a stop, after the health service says NOT_SERVING: serve on for `shutdown_delay` seconds. Clients that
        balance over several apiservers watch that health (`client.targets`) and send their next calls to the
        others; only then does the server refuse new calls (a call that arrives as the server stops taking any can
        be cancelled, and a create cancelled that way cannot be repeated safely: its caller sees an error)."""
        if self.config.shutdown_delay > 0:
            log.info("apiserver stopping: serving while clients move away", seconds=self.config.shutdown_delay)
            await self.clock.sleep(self.config.shutdown_delay)

    async def _exposition(self) -> bytes:
        return self.metrics.exposition()

    async def _readiness(self) -> str:
        """Why this apiserver is not ready ("" when it is): caches still filling, or etcd's NOSPACE alarm raised
        (every write would be refused until an operator frees space: docs/fleet.md)."""
        if not self.started.is_set():
            return "the watch caches are still filling"
        return await self._etcd_alarm()

    async def _etcd_alarm(self) -> str:
        if self._etcd is None:
            return ""
        try:
            status = await self._etcd.status()
        except ApiError as exc:  # etcd unreachable: reads from the cache still work; not this probe's concern
            log.debug("etcd status for /readyz failed", error=str(exc))
            return ""
        return NO_SPACE_MESSAGE if no_space_alarm(status.errors) else ""


__all__ = ["ApiServer", "ApiServerConfig"]
