"""The dashboard's HTTP side (aiohttp): the page, its JSON endpoints, the change stream and the actions.

The endpoints are documented for `curl` users in docs/dashboard.md. Guarantees:

* Reads are served from the informer caches (`ClusterView`), never by a call per request to the API server; a
  read before the caches synced waits for them (503 after `SYNC_WAIT` seconds).
* `/api/v1/stream` is a server-sent-events stream: `change` events name what changed (see `state.Subscription`);
  a comment every `KEEPALIVE` seconds keeps proxies from closing it.
* Writes need an `Origin`, when the browser sends one, equal to the dashboard's own, and a POST needs
  `Content-Type: application/json` (which no HTML form can send; a cross-site script sending it, or a DELETE, has
  to pass a CORS preflight the dashboard never grants): a page of another site cannot act through the dashboard.
  Refusals are JSON `{"error": "one line"}` with a fitting HTTP status.
* Who may ask at all (its own `Host` names, the access token) is `access.Access`, checked first on every route.
* A browser that goes away ends what serves it: the server runs with aiohttp's `handler_cancellation` (see
  `runner`), so a closed change stream or log tail cancels its handler at once, which closes the log stream to the
  agent (and so the agent's stream from Docker) instead of holding it until the next line; a write already sent to
  the API server is finished anyway (shielded).
* Every answer carries a Content-Security-Policy allowing only the dashboard's own scripts and styles.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from caravanserai import meta, v1
from caravanserai.dashboard import setviews, views
from caravanserai.dashboard.access import Access
from caravanserai.dashboard.actions import ActionError, Actions
from caravanserai.dashboard.logstream import LogSource
from caravanserai.dashboard.state import ClusterView
from caravanserai.errors import Invalid
from caravanserai.text import manifest

log = structlog.get_logger(__name__)

STATIC = Path(str(resources.files("caravanserai.dashboard") / "static"))
SYNC_WAIT = 10.0
KEEPALIVE = 15.0
COALESCE = 0.1
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, ensure_ascii=False))


def _refuse(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every answer; the write rules of the module docstring; ActionError → JSON."""
    if request.method not in ("GET", "HEAD"):
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            response: web.StreamResponse = _refuse(403, f"refused: a request from {origin} may not act here")
        elif request.method == "POST" and request.content_type != "application/json":
            response = _refuse(415, "refused: a POST must be sent as application/json")
        else:
            response = await _answer(request, handler)
    else:
        response = await _answer(request, handler)
    if not response.prepared:
        response.headers.update(SECURITY_HEADERS)
    return response


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ActionError as err:
        return _refuse(err.status, err.message)


class Dashboard:
    """The aiohttp application over a `ClusterView`, `Actions` and a `LogSource`."""

    def __init__(self, state: ClusterView, actions: Actions, logs: LogSource, *, server: str, access: Access) -> None:
        self.state = state
        self.access = access
        self.actions = actions
        self.logs = logs
        self.server = server
        # The tasks serving server-sent event streams. A browser that went away is noticed only at the stream's
        # next write, and aiohttp no longer tracks that handler, so shutdown ends every stream itself.
        self._streams: set[asyncio.Task[Any]] = set()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_guard, self.access.middleware], client_max_size=2 * 1024 * 1024)
        get, r = app.router.add_get, self
        for path, handler in (
            ("/", r.index),
            ("/healthz", r.healthz),
            ("/readyz", r.readyz),
            ("/api/v1/config", r.config),
            ("/api/v1/cluster", r.cluster),
            ("/api/v1/projects", r.projects),
            ("/api/v1/projects/{name}", r.project),
            ("/api/v1/projects/{name}/logs", r.project_logs),
            ("/api/v1/namespaces", r.namespaces),
            ("/api/v1/namespaces/{namespace}/projects/{name}", r.project),
            ("/api/v1/namespaces/{namespace}/projects/{name}/logs", r.project_logs),
            ("/api/v1/namespaces/{namespace}/projectsets/{name}", r.projectset),
            ("/api/v1/projectsets", r.projectsets),
            ("/api/v1/projectsets/{name}", r.projectset),
            ("/api/v1/events", r.events),
            ("/api/v1/kinds", r.kinds),
            ("/api/v1/kinds/{plural}", r.kind),
            ("/api/v1/kinds/{plural}/{name}", r.object),
            ("/api/v1/stream", r.stream),
        ):
            get(path, handler)
        app.router.add_post("/api/v1/apply", r.apply)
        app.router.add_delete("/api/v1/projects/{name}", r.delete_project)
        app.router.add_delete("/api/v1/namespaces/{namespace}/projects/{name}", r.delete_project)
        app.router.add_post("/api/v1/nodes/{name}/{action:cordon|uncordon|drain}", r.node_action)
        app.router.add_static("/static/", STATIC, append_version=False)
        app.on_shutdown.append(self._end_streams)
        return app

    def runner(self) -> web.AppRunner:
        """The app's runner: no access log; a handler is cancelled when its client disconnects."""
        return web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0, handler_cancellation=True)

    @contextlib.contextmanager
    def _streaming(self) -> Iterator[None]:
        task = asyncio.current_task()
        assert task is not None
        self._streams.add(task)
        try:
            yield
        finally:
            self._streams.discard(task)

    async def _end_streams(self, _app: web.Application) -> None:
        streams = set(self._streams)
        for task in streams:
            task.cancel()
        if streams:
            await asyncio.wait(streams)

    # ---- the page and health ----------------------------------------------------------------------------

    async def index(self, _request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, _request: web.Request) -> web.Response:
        if self.state.synced():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not ready: the caches are still filling\n")

    async def config(self, _request: web.Request) -> web.Response:
        return _json({"readOnly": self.actions.read_only, "server": self.server})

    # ---- reads --------------------------------------------------------------------------------------------

    async def _synced(self, *resources: str) -> float:
        """The time now, once the caches of `resources` are synced; ActionError 503 when they do not sync in time."""
        try:
            await asyncio.wait_for(self.state.wait_synced(*resources), SYNC_WAIT)
        except TimeoutError:
            raise ActionError(503, "the dashboard has not reached the API server yet") from None
        return self.state.clock.now()

    async def cluster(self, _request: web.Request) -> web.Response:
        now = await self._synced("nodes", "leases", "projects", "nodegroups")
        s = self.state
        objects = s.objects("nodes"), s.objects("leases"), s.objects("projects")
        return _json(views.cluster_view(*objects, now, groups=s.objects("nodegroups")))

    async def namespaces(self, _request: web.Request) -> web.Response:
        """The namespaces for the picker: name and phase, by name."""
        await self._synced("namespaces")
        found = sorted(self.state.objects("namespaces"), key=lambda n: n.metadata.name)
        rows = [{"name": n.metadata.name, "phase": n.status.phase or v1.NAMESPACE_ACTIVE} for n in found]
        return _json({"namespaces": rows})

    async def projects(self, request: web.Request) -> web.Response:
        now = await self._synced("projects")
        label, phase = request.query.get("label", ""), request.query.get("phase", "")
        namespace = _namespace(request)
        try:
            projects = self.state.objects("projects")
            return _json(views.projects_view(projects, now, label=label, phase=phase, namespace=namespace))
        except Invalid as err:
            raise ActionError(422, f"label: {err.message}") from None

    async def project(self, request: web.Request) -> web.Response:
        now = await self._synced("projects", "nodes", "events")
        project = self._project(request)
        node = self.state.get("nodes", project.status.node_ref) if project.status.node_ref else None
        return _json(views.project_view(project, node, self.state.objects("events"), now))

    def _project(self, request: web.Request) -> v1.Project:
        """The project the path names (`/namespaces/NS/projects/NAME`; `/projects/NAME`: of "default")."""
        name, namespace = request.match_info["name"], _path_namespace(request)
        project: v1.Project | None = self.state.get("projects", name, namespace)  # the kind holds v1.Project
        if project is None:
            raise ActionError(404, f'projects "{name}" not found in namespace "{namespace}"')
        return project

    async def projectsets(self, request: web.Request) -> web.Response:
        now = await self._synced("projectsets")
        sets = self.state.objects("projectsets")
        return _json(setviews.projectsets_view(sets, now, namespace=_namespace(request)))

    async def projectset(self, request: web.Request) -> web.Response:
        now = await self._synced("projectsets", "projects", "events")
        name, namespace = request.match_info["name"], _path_namespace(request)
        projectset: v1.ProjectSet | None = self.state.get("projectsets", name, namespace)  # holds v1.ProjectSet
        if projectset is None:
            raise ActionError(404, f'projectsets "{name}" not found in namespace "{namespace}"')
        s = self.state
        return _json(setviews.projectset_view(projectset, s.objects("projects"), s.objects("events"), now))

    async def events(self, request: web.Request) -> web.Response:
        now = await self._synced("events")
        q = request.query
        events = self.state.objects("events")
        return _json(
            views.events_view(
                events, now, type_=q.get("type", ""), obj=q.get("object", ""), namespace=_namespace(request)
            )
        )

    async def kinds(self, _request: web.Request) -> web.Response:
        return _json(views.kinds_view(self.state.kinds.values()))

    def _kind(self, plural: str) -> Any:
        kind = self.state.kinds.get(plural)
        if kind is None:
            raise ActionError(
                404, f'the dashboard knows no resource "{plural}" (known: {", ".join(sorted(self.state.kinds))})'
            )
        return kind

    async def kind(self, request: web.Request) -> web.Response:
        kind = self._kind(request.match_info["plural"])
        now = await self._synced(kind.plural)
        return _json(views.kind_table(kind, self.state.objects(kind.plural), now, namespace=_namespace(request)))

    async def object(self, request: web.Request) -> web.Response:
        kind = self._kind(request.match_info["plural"])
        await self._synced(kind.plural)
        name, namespace = request.match_info["name"], _namespace(request)
        obj = self.state.get(kind.plural, name, namespace)
        if obj is None:
            where = "" if kind.cluster_scoped else f' in namespace "{namespace or meta.DEFAULT_NAMESPACE}"'
            raise ActionError(404, f'{kind.plural} "{name}" not found{where}')
        return _json(manifest.to_dict(obj))

    # ---- streams ----------------------------------------------------------------------------------------

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: `change` with {"resources": [...], "objects": [{resource, name, type}]}."""
        response = await _event_stream(request)
        with self._streaming(), self.state.subscribe() as subscription, contextlib.suppress(ConnectionResetError):
            await response.write(b"event: hello\ndata: {}\n\n")
            while True:
                change = await subscription.next(clock=self.state.clock, coalesce=COALESCE, timeout=KEEPALIVE)
                if change is None:
                    await response.write(b": keepalive\n\n")
                    continue
                data = json.dumps({"resources": change.resources, "objects": change.objects})
                await response.write(f"event: change\ndata: {data}\n\n".encode())
        return response  # the browser went away

    async def project_logs(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: `line` with {"service", "text"} per log line (following), `failed` with
        {"error"} when the agent cannot be reached or refuses, then the stream ends."""
        await self._synced("projects", "nodes")
        project = self._project(request)
        service = request.query.get("service", "")
        tail = _int(request.query.get("tail", "100"), "tail")
        lines = self.logs.open(project, service, tail=tail)  # ActionError before the stream opens
        response = await _event_stream(request)
        with self._streaming():
            return await self._send_lines(response, lines)

    @staticmethod
    async def _send_lines(response: web.StreamResponse, lines: AsyncGenerator[v1.LogLine, None]) -> web.StreamResponse:
        try:
            async for line in lines:
                data = json.dumps({"service": line.service, "text": line.data.decode("utf-8", "replace")})
                await response.write(f"event: line\ndata: {data}\n\n".encode())
        except ActionError as err:
            await response.write(f"event: failed\ndata: {json.dumps({'error': err.message})}\n\n".encode())
        except ConnectionResetError:
            pass  # the browser went away
        finally:
            await lines.aclose()
        return response

    # ---- writes ---------------------------------------------------------------------------------------------

    async def apply(self, request: web.Request) -> web.Response:
        body = await _body(request)
        text = body.get("manifest")
        if not isinstance(text, str):
            raise ActionError(422, 'manifest: expected the manifest text as a string ({"manifest": "..."})')
        namespace = body.get("namespace", "")
        if not isinstance(namespace, str):
            raise ActionError(422, "namespace: expected a namespace name as a string")
        outcomes = await asyncio.shield(self.actions.apply(text, namespace))
        return _json({"applied": [{"object": o.object, "action": o.action} for o in outcomes]})

    async def delete_project(self, request: web.Request) -> web.Response:
        name, namespace = request.match_info["name"], _path_namespace(request)
        deleted = await asyncio.shield(self.actions.delete_project(name, namespace))
        return _json({"object": f"project/{name}", "deleted": deleted})

    async def node_action(self, request: web.Request) -> web.Response:
        name, action = request.match_info["name"], request.match_info["action"]
        if action == "drain":
            done = await asyncio.shield(self.actions.drain(name))
            moved = [meta.shown(key) for key in done.moved]
            held = {meta.shown(key): reason for key, reason in sorted(done.refused.items())}
            return _json({"object": f"node/{name}", "drained": not held, "moved": moved, "held": held})
        changed = await asyncio.shield(self.actions.cordon(name, action == "cordon"))
        return _json({"object": f"node/{name}", "action": action, "changed": changed})


async def _event_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            **SECURITY_HEADERS,
        }
    )
    await response.prepare(request)
    return response


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise ActionError(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ActionError(400, "the body must be a JSON object")
    return body


def _namespace(request: web.Request) -> str:
    """The `?namespace=` of a list ("" = every namespace)."""
    return request.query.get("namespace", "")


def _path_namespace(request: web.Request) -> str:
    """The namespace a path names (`/namespaces/NS/…`), "default" for the paths without one."""
    return request.match_info.get("namespace") or meta.DEFAULT_NAMESPACE


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ActionError(422, f"{name}: {text!r} is not a whole number") from None


__all__ = ["Dashboard"]
