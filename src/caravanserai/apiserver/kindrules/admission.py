"""Admission hooks of a custom kind: HTTP(S) callbacks the apiserver calls before it writes an object.

A definition lists its hooks in `spec.admissionHooks`. On each Create and Update (of the operations a hook names)
the apiserver POSTs an `AdmissionReview` to each hook, in the definition's order:

    {"apiVersion": "caravanserai/v1", "kind": "AdmissionReview",
     "request": {"uid": "…", "operation": "CREATE" | "UPDATE", "apiVersion": "example.com/v1", "kind": "Backup",
                 "resource": "backups", "name": "…", "object": {…}, "oldObject": {…} | null}}

and reads the reply (the fields may also be wrapped in "response", as Kubernetes writes them):

    {"allowed": true | false, "message": "…", "field": "spec.schedule",
     "patch": [{"op": "add", "path": "/spec/x", "value": 1}, …],   (mutating hooks: RFC 6902 JSON patch)
     "object": {…}}                                                  (mutating hooks: or the whole changed object)

Guarantees:

* Mutating hooks run first, after the server's defaults and before validation; each sees the previous one's
  result. Only `spec`, `metadata.labels` and `metadata.annotations` of what they return are kept (name, uid,
  versions and status stay the server's). The result is validated like any request.
* Validating hooks run after validation, on the object as it will be stored; `allowed: false` refuses the write
  with Invalid naming `field` (default `metadata.name`) and the hook's message.
* A hook that cannot be reached, times out (`timeoutSeconds`, default 10, at most 30), answers other than 200 or
  with a reply that does not parse: with `failurePolicy: Fail` (default) the write is refused (InternalError naming
  the hook), with `Ignore` the hook is skipped and a warning logged.
* URLs are https://, or http:// on a loopback address only.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Sequence
from typing import Any

import jsonpatch
import structlog
from google.protobuf import json_format
from google.protobuf.message import Message

from caravanserai import meta, v1
from caravanserai.apiserver.kindrules.callbacks import MAX_TIMEOUT, HookFailed, post_review, url_problem
from caravanserai.errors import FieldViolation, InternalError, Invalid
from caravanserai.text.violations import quote

log = structlog.get_logger(__name__)

VALIDATING, MUTATING = "Validating", "Mutating"
FAIL, IGNORE = "Fail", "Ignore"
OPERATIONS = ("CREATE", "UPDATE")


def problems(hooks: Sequence[v1.AdmissionHook], *, path: str = "spec.admissionHooks") -> list[FieldViolation]:
    """What is wrong with a definition's (or an AdmissionPolicy's: `path` "spec.hooks") hooks (empty: they can be
    called); each violation names `path[i].field`."""
    found: list[FieldViolation] = []
    names: set[str] = set()
    for i, hook in enumerate(hooks):
        where = f"{path}[{i}]"
        if not hook.name:
            found.append(FieldViolation(f"{where}.name", "is required"))
        elif hook.name in names:
            found.append(FieldViolation(f"{where}.name", f"{quote(hook.name)} is used by another hook"))
        names.add(hook.name)
        if hook.type not in (VALIDATING, MUTATING):
            found.append(FieldViolation(f"{where}.type", f"{quote(hook.type)} is not one of Validating, Mutating"))
        if hook.failure_policy not in ("", FAIL, IGNORE):
            found.append(
                FieldViolation(f"{where}.failurePolicy", f"{quote(hook.failure_policy)} is not Fail or Ignore")
            )
        if not 0 <= hook.timeout_seconds <= MAX_TIMEOUT:
            found.append(FieldViolation(f"{where}.timeoutSeconds", f"must be between 0 and {MAX_TIMEOUT:g}"))
        found.extend(
            FieldViolation(f"{where}.operations[{j}]", f"{quote(op)} is not one of {', '.join(OPERATIONS)}")
            for j, op in enumerate(hook.operations)
            if op not in OPERATIONS
        )
        bad_url = url_problem(hook.url)
        if bad_url:
            found.append(FieldViolation(f"{where}.url", bad_url))
        if hook.ca_bundle:
            try:
                ssl.create_default_context(cadata=hook.ca_bundle)
            except (ssl.SSLError, ValueError) as exc:
                found.append(FieldViolation(f"{where}.caBundle", f"is not usable PEM: {exc}"))
    return found


class Hooks:
    """The admission hooks of one custom kind, or of one AdmissionPolicy for one kind (see the module
    docstring)."""

    def __init__(self, hooks: Sequence[v1.AdmissionHook], *, kind: meta.Kind) -> None:
        self._kind = kind
        self._validating = [h for h in hooks if h.type == VALIDATING]
        self._mutating = [h for h in hooks if h.type == MUTATING]

    @property
    def mutating(self) -> bool:
        return bool(self._mutating)

    async def mutate(self, obj: Message, old: Message | None) -> Any:
        """`obj` as the mutating hooks change it (a new message; `obj` is not changed)."""
        current: Any = type(obj)()
        current.CopyFrom(obj)
        for hook in self._applying(self._mutating, old):
            reply = await self._call(hook, current, old)
            if reply is not None:
                _refuse_if_denied(hook, reply, self._what(current))
                current = _changed(hook, current, reply, self._what(current))
        return current

    async def validate(self, obj: Message, old: Message | None) -> None:
        """Return when every validating hook allows the write of `obj`; Invalid naming the field otherwise."""
        for hook in self._applying(self._validating, old):
            reply = await self._call(hook, obj, old)
            if reply is not None:
                _refuse_if_denied(hook, reply, self._what(obj))

    @staticmethod
    def _applying(hooks: list[v1.AdmissionHook], old: Message | None) -> list[v1.AdmissionHook]:
        operation = "CREATE" if old is None else "UPDATE"
        return [h for h in hooks if not h.operations or operation in h.operations]

    async def _call(self, hook: v1.AdmissionHook, obj: Message, old: Message | None) -> dict[str, Any] | None:
        """The hook's reply; None when it failed and its policy is Ignore; InternalError when Fail."""
        try:
            return await _post(hook, self._review(obj, old))
        except HookFailed as exc:
            if hook.failure_policy == IGNORE:
                log.warning("admission hook failed; ignored", hook=hook.name, kind=self._kind.kind, error=str(exc))
                return None
            raise InternalError(f"admission hook {quote(hook.name)} failed: {exc}") from None

    def _what(self, obj: Message) -> str:
        return f"{self._kind.kind.lower()} {quote(getattr(obj, 'metadata').name)}"

    def _review(self, obj: Message, old: Message | None) -> dict[str, Any]:
        request = {
            "uid": str(uuid.uuid4()),
            "operation": "CREATE" if old is None else "UPDATE",
            "apiVersion": self._kind.api_version,
            "kind": self._kind.kind,
            "resource": self._kind.plural,
            "name": getattr(obj, "metadata").name,
            "object": json_format.MessageToDict(obj),
            "oldObject": None if old is None else json_format.MessageToDict(old),
        }
        return {"apiVersion": "caravanserai/v1", "kind": "AdmissionReview", "request": request}


async def _post(hook: v1.AdmissionHook, review: dict[str, Any]) -> dict[str, Any]:
    reply = await post_review(hook.url, review, timeout=hook.timeout_seconds, ca_bundle=hook.ca_bundle)
    if not isinstance(reply.get("allowed"), bool):
        raise HookFailed('the reply has no boolean "allowed"')
    return reply


def _refuse_if_denied(hook: v1.AdmissionHook, reply: dict[str, Any], what: str) -> None:
    if reply["allowed"]:
        return
    status = reply.get("status")
    message = reply.get("message") or (status.get("message") if isinstance(status, dict) else None) or "refused"
    field = reply.get("field") or "metadata.name"
    raise Invalid.of([FieldViolation(str(field), f"denied by admission hook {hook.name}: {message}")], what=what)


def _changed(hook: v1.AdmissionHook, obj: Message, reply: dict[str, Any], what: str) -> Any:
    """`obj` with the hook's patch or object applied (spec, labels and annotations only)."""
    patch, whole = reply.get("patch"), reply.get("object")
    if patch is None and whole is None:
        return obj
    document = json_format.MessageToDict(obj)
    try:
        if patch is not None:
            document = jsonpatch.apply_patch(document, patch)
        elif isinstance(whole, dict):
            document = whole
        parsed: Any = json_format.ParseDict(document, type(obj)())
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, json_format.ParseError, TypeError) as exc:
        raise Invalid.of(
            [FieldViolation("object", f"admission hook {hook.name} returned a bad change: {exc}")]
        ) from None
    result: Any = type(obj)()
    result.CopyFrom(obj)
    result.spec.CopyFrom(parsed.spec)
    result.metadata.labels.clear()
    result.metadata.labels.update(parsed.metadata.labels)
    result.metadata.annotations.clear()
    result.metadata.annotations.update(parsed.metadata.annotations)
    return result


__all__ = ["FAIL", "IGNORE", "MUTATING", "VALIDATING", "Hooks", "problems"]
