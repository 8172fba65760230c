"""Who may read a project's logs, exec into its containers or port-forward to them on this node: the agent's
half of the subresources `projects/log` (`get`), `projects/exec` and `projects/portforward` (`create`).

Guarantees:

* **admin** (the agent's own authenticator says so: the certificate `admin`, or a token of user or group `admin`)
  is allowed without asking anyone, so an admin still reaches a node whose API server is away.
* **A node** (`node:*`, this one included) is never allowed: a node reads what its projects reference, never what
  another's containers print.
* **Anyone else** is allowed only when the API server's authorizer says so for that caller: `Authorize` (a
  SubjectAccessReview, `Client.can_i` with the caller's user and groups, made with this node's credentials) for
  the subresource in the project's namespace ("" is `default`), naming the project — so what a caller may do here is
  what their roles grant them there (`edit`, `admin`, `cluster-admin` by default; never `view`).
* **Answers are kept briefly**: an allow for `ALLOWED_TTL` seconds, a refusal for `DENIED_TTL`, by the injected
  clock, at most `MAX_ANSWERS` of them; so a binding removed stops a new call here within `ALLOWED_TTL`, and one
  added allows within `DENIED_TTL` (plus the API server's own watch latency). An open stream is not cut.
* **No answer is no**: when the API server cannot be asked within `ASK_TIMEOUT`, `ReviewUnavailable` (the service
  answers UNAVAILABLE); nothing is allowed on a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from caravanserai import meta, v1
from caravanserai.clock import Clock, run_within
from caravanserai.errors import ApiError
from caravanserai.process.identity import Identity

log = structlog.get_logger(__name__)

ALLOWED_TTL = 5.0
DENIED_TTL = 2.0
MAX_ANSWERS = 4096
ASK_TIMEOUT = 5.0
LOG, EXEC, PORT_FORWARD = "projects/log", "projects/exec", "projects/portforward"
ACTIONS = {LOG: "read logs of", EXEC: "exec into", PORT_FORWARD: "port-forward to"}
"""How refusals phrase each subresource ("alice may not read logs of project team-a/web: …")."""


class Asker(Protocol):
    """What the review asks (`caravanserai.client.Client.can_i`)."""

    async def can_i(
        self,
        verb: str,
        resource: str,
        *,
        namespace: str | None = ...,
        name: str = ...,
        user: str = ...,
        groups: Sequence[str] = ...,
    ) -> v1.AccessResponse: ...


class ReviewUnavailable(Exception):
    """The API server could not be asked; the message says why."""


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    message: str  # for a refusal, the one line the caller is told


@dataclass(frozen=True, slots=True)
class _Kept:
    allowed: bool
    reason: str
    until: float


class AccessReview:
    """Decides for the Agent service (module docstring). Without `asker` (no API server to ask) only admin is
    allowed, as before roles existed."""

    def __init__(self, asker: Asker | None, *, clock: Clock) -> None:
        self._asker = asker
        self._clock = clock
        self._kept: dict[tuple[Identity, str, str, str], _Kept] = {}

    async def review(self, who: Identity, subresource: str, *, namespace: str, project: str) -> Verdict:
        """May `who` use `subresource` of the project `namespace`/`project`? ReviewUnavailable when the API server
        could not be asked."""
        namespace = namespace or meta.DEFAULT_NAMESPACE
        target = f"{ACTIONS[subresource]} project {meta.join_key(namespace, project)}"
        action = f"{who.user} may not {target}"
        if who.is_admin:
            return Verdict(True, "")
        if who.node is not None:
            return Verdict(False, f"{action}: nodes never may")
        if self._asker is None:
            return Verdict(False, f"{action}: only admin may (this agent has no API server to ask about roles)")
        try:
            allowed, reason = await self._answer(self._asker, who, subresource, namespace, project)
        except (ApiError, TimeoutError) as exc:
            log.warning("cannot ask the API server", user=who.user, subresource=subresource, error=str(exc))
            why = str(exc) or type(exc).__name__
            raise ReviewUnavailable(f"cannot ask the API server whether {who.user} may {target}: {why}") from exc
        return Verdict(allowed, "" if allowed else f"{action}: {reason or 'not allowed'}")

    async def _answer(
        self, asker: Asker, who: Identity, subresource: str, namespace: str, project: str
    ) -> tuple[bool, str]:
        key = (who, subresource, namespace, project)
        now = self._clock.monotonic()
        kept = self._kept.get(key)
        if kept is not None and kept.until > now:
            return kept.allowed, kept.reason
        ask = asker.can_i(
            meta.SUBRESOURCES[subresource],
            subresource,
            namespace=namespace,
            name=project,
            user=who.user,
            groups=sorted(who.groups),
        )
        answer = await run_within(self._clock, ask, ASK_TIMEOUT)  # ApiError, TimeoutError: no answer
        self._keep(key, answer, now)
        return answer.allowed, answer.reason

    def _keep(self, key: tuple[Identity, str, str, str], answer: v1.AccessResponse, now: float) -> None:
        if len(self._kept) >= MAX_ANSWERS:
            self._kept = {k: v for k, v in self._kept.items() if v.until > now}
            if len(self._kept) >= MAX_ANSWERS:
                self._kept.clear()
        ttl = ALLOWED_TTL if answer.allowed else DENIED_TTL
        self._kept[key] = _Kept(answer.allowed, answer.reason, now + ttl)


__all__ = [
    "ACTIONS",
    "ALLOWED_TTL",
    "ASK_TIMEOUT",
    "DENIED_TTL",
    "EXEC",
    "LOG",
    "MAX_ANSWERS",
    "PORT_FORWARD",
    "AccessReview",
    "Asker",
    "ReviewUnavailable",
    "Verdict",
]
