"""What the dashboard may change, with its own identity (the client flags it was started with).

Each action goes through the same library code as caractrl (`caravanserai.client.apply`, `nodeops`), so the API
decides what is allowed: a refusal comes back as the API's one-line error (`ActionError`, with an HTTP status),
never as a traceback. With `--read-only` every action is refused before anything is sent.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import grpc

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.apply import applicable, apply_object
from caravanserai.client.budgets import BudgetedMoves, move_within_budgets
from caravanserai.client.nodeops import (
    drain_refusal,
    movable_projects,
    set_unschedulable,
    unprotected_volumes,
)
from caravanserai.clock import Clock
from caravanserai.errors import ApiError, CaravanseraiError, Invalid, NotFound
from caravanserai.project.lifecycle import DEFAULT_HANDOFF
from caravanserai.text.manifestfiles import Document, ManifestError, Source, load_source

MAX_MANIFEST_BYTES = 1024 * 1024
MANIFEST_SOURCE = "manifest"
"""The source name of a pasted manifest in origins: `manifest, document 2`."""
READ_ONLY = "the dashboard is read-only (started with --read-only)"
DRAIN_WAY_OUT = "add a backup to those volumes, or drain with `caractrl drain NODE --force` to leave the data behind"

# gRPC status → HTTP status of the dashboard's JSON answer.
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 422,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.OUT_OF_RANGE: 410,
}


class ActionError(Exception):
    """An action was refused: `status` is the HTTP status, `message` one line for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def api_error(err: ApiError) -> ActionError:
    """The ActionError for an API refusal: the server's message, one line, field violations included."""
    message = err.message
    if isinstance(err, Invalid) and err.violations:
        fields = "; ".join(str(v) for v in err.violations)
        message = fields if fields in message else f"{message}: {fields}"
    return ActionError(HTTP_STATUS.get(err.code, 500), " ".join(message.split()))


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    """One object applied: `project/web created`."""

    object: str
    action: str


class Actions:
    """The dashboard's writes. Every method raises ActionError when refused."""

    def __init__(self, client: Client, *, read_only: bool, clock: Clock) -> None:
        self._client = client
        self.read_only = read_only
        self._clock = clock

    def _check_allowed(self) -> None:
        if self.read_only:
            raise ActionError(403, READ_ONLY)

    async def apply(self, text: str, namespace: str = "") -> list[ApplyOutcome]:
        """Create or update every object of a pasted manifest (YAML or JSON, several documents allowed), in order,
        as `caractrl apply` does (same reader, same merge); the first refusal stops and is reported, naming its
        document, with the objects applied before it. An object of a namespaced kind that names no namespace goes
        into `namespace` (the picker's), else into "default"."""
        self._check_allowed()
        outcomes: list[ApplyOutcome] = []
        for doc in await self._documents(text):
            kind = meta.kind_of(doc.object)
            if namespace and not kind.cluster_scoped and not doc.object.metadata.namespace:
                doc.object.metadata.namespace = namespace
            label = f"{kind.kind.lower()}/{doc.object.metadata.name}"
            if not applicable(kind):
                raise ActionError(422, _after(outcomes, f"{doc.origin}: kind {kind.kind} cannot be applied"))
            try:
                applied = await apply_object(self._client, doc.object)
            except ApiError as err:
                refused = api_error(err)
                raise ActionError(
                    refused.status, _after(outcomes, f"{doc.origin}: {label}: {refused.message}")
                ) from None
            outcomes.append(ApplyOutcome(label, applied.action))
        return outcomes

    async def _documents(self, text: str) -> list[Document]:
        """The objects of `text` with their origins (`manifest, document 2`); every unreadable document at once."""
        if len(text.encode()) > MAX_MANIFEST_BYTES:
            raise ActionError(413, f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        with contextlib.suppress(CaravanseraiError):
            await self._client.discover()  # custom kinds the server serves can be read too
        documents: list[Document] = []
        problems: list[str] = []
        for item in load_source(Source(MANIFEST_SOURCE, text)):
            if isinstance(item, ManifestError):
                problems.append(" ".join(str(item).split()))
            else:
                documents.append(item)
        if problems:
            raise ActionError(422, "; ".join(problems))
        if not documents:
            raise ActionError(422, "the manifest holds no object")
        return documents

    async def delete_project(self, name: str, namespace: str = meta.DEFAULT_NAMESPACE) -> bool:
        """Delete the project `name` of `namespace` (active ones become Terminating first); returns whether the record
        is gone."""
        self._check_allowed()
        try:
            response = await self._client.projects.delete(meta.join_key(namespace, name))
        except NotFound:
            raise ActionError(404, f'projects "{name}" not found in namespace "{namespace}"') from None
        except ApiError as err:
            raise api_error(err) from None
        return bool(response.deleted)

    async def cordon(self, node: str, value: bool) -> bool:
        """Set (cordon) or clear (uncordon) spec.unschedulable; returns whether it changed."""
        self._check_allowed()
        try:
            return await set_unschedulable(self._client, node, value)
        except NotFound:
            raise ActionError(404, f'nodes "{node}" not found') from None
        except ApiError as err:
            raise api_error(err) from None

    async def drain(self, node: str) -> BudgetedMoves:
        """Cordon `node`, then move its Scheduled and Running projects (reason NodeDrained, `lifecycle.move`) with a
        hand-off of `DEFAULT_HANDOFF` seconds within their ProjectSets' disruption budgets, as `caractrl drain` does
        (`client.budgets`), in one pass: what a budget holds now is reported with its reason (`refused`), not waited
        for (drain again once the moved replicas are available). A project with a Persistent volume without a
        backup is refused (409, naming the projects and volumes) before anything is written: the dashboard has no
        force option."""
        self._check_allowed()
        try:
            self._refuse_unprotected(node, await self._movable(node))
            await self.cordon(node, True)
            projects = await self._movable(node)  # again: one may have been bound before the cordon took effect
            self._refuse_unprotected(node, projects)
            return await move_within_budgets(
                self._client, node, projects, clock=self._clock, handoff=DEFAULT_HANDOFF, timeout=0.0
            )
        except ApiError as err:
            raise api_error(err) from None

    @staticmethod
    def _refuse_unprotected(node: str, projects: list[v1.Project]) -> None:
        unprotected = unprotected_volumes(projects)
        if unprotected:
            raise ActionError(409, drain_refusal(node, unprotected, DRAIN_WAY_OUT))

    async def _movable(self, node: str) -> list[v1.Project]:
        """The projects a drain of `node` moves, by key."""
        page = list(await self._client.projects.list(field_selector=f"status.nodeRef={node}"))
        keys = movable_projects(page, node)
        return sorted((p for p in page if meta.key_of(p) in keys), key=meta.key_of)


def _after(outcomes: list[ApplyOutcome], message: str) -> str:
    if not outcomes:
        return message
    done = ", ".join(f"{o.object} {o.action}" for o in outcomes)
    return f"{message} (before it: {done})"


__all__ = ["ActionError", "Actions", "ApplyOutcome", "READ_ONLY", "api_error"]
