"""The agent's access review: admin without asking, nodes never, everyone else as the API server answers for them,
answers kept briefly, and no answer is no."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from caravanserai import v1
from caravanserai.agent.access.review import (
    ALLOWED_TTL,
    ASK_TIMEOUT,
    DENIED_TTL,
    EXEC,
    LOG,
    PORT_FORWARD,
    AccessReview,
    ReviewUnavailable,
)
from caravanserai.errors import Unavailable
from caravanserai.process.identity import Identity
from caravanserai.testing.clock import FakeClock


class Asker:
    """Answers as a table says (user, subresource, namespace, project) → allowed; records every question."""

    def __init__(self, allowed: set[tuple[str, str, str, str]]) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, str, str | None, str, str, tuple[str, ...]]] = []
        self.fail: Exception | None = None
        self.hang = False

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
        self.asked.append((verb, resource, namespace, name, user, tuple(groups)))
        if self.fail is not None:
            raise self.fail
        if self.hang:
            await asyncio.Event().wait()
        yes = (user, resource, namespace or "", name) in self.allowed
        return v1.AccessResponse(allowed=yes, reason="allowed by x" if yes else f"no role bound to {user}")


async def test_admin_without_asking_and_nodes_never() -> None:
    asker = Asker({("node:n1", LOG, "default", "web")})
    review = AccessReview(asker, clock=FakeClock())
    assert (await review.review(Identity("admin"), LOG, namespace="", project="web")).allowed
    assert (await review.review(Identity("ops", frozenset({"admin"})), EXEC, namespace="a", project="web")).allowed
    refused = await review.review(Identity("node:n1"), LOG, namespace="", project="web")
    assert (
        not refused.allowed and refused.message == "node:n1 may not read logs of project default/web: nodes never may"
    )
    assert asker.asked == []


async def test_others_as_the_api_server_answers_for_them() -> None:
    asker = Asker({("alice", LOG, "team-a", "web"), ("alice", PORT_FORWARD, "team-a", "web")})
    review = AccessReview(asker, clock=FakeClock())
    alice = Identity("alice", frozenset({"team-a", "devs"}))
    assert (await review.review(alice, LOG, namespace="team-a", project="web")).allowed
    assert (await review.review(alice, PORT_FORWARD, namespace="team-a", project="web")).allowed
    refused = await review.review(alice, EXEC, namespace="team-a", project="web")
    assert refused.message == "alice may not exec into project team-a/web: no role bound to alice"
    refused = await review.review(alice, LOG, namespace="team-b", project="web")
    assert refused.message == "alice may not read logs of project team-b/web: no role bound to alice"
    assert asker.asked[0] == ("get", LOG, "team-a", "web", "alice", ("devs", "team-a"))
    assert [a[:2] for a in asker.asked] == [("get", LOG), ("create", PORT_FORWARD), ("create", EXEC), ("get", LOG)]


async def test_an_empty_namespace_is_default() -> None:
    asker = Asker({("bob", LOG, "default", "web")})
    assert (
        await AccessReview(asker, clock=FakeClock()).review(Identity("bob"), LOG, namespace="", project="web")
    ).allowed
    assert asker.asked[0][2] == "default"  # never "" (which would ask about every namespace)


async def test_answers_are_kept_briefly() -> None:
    clock = FakeClock()
    asker = Asker({("alice", LOG, "team-a", "web")})
    review = AccessReview(asker, clock=clock)
    alice = Identity("alice")

    async def ask(namespace: str) -> bool:
        return (await review.review(alice, LOG, namespace=namespace, project="web")).allowed

    assert await ask("team-a") and not await ask("team-b")
    assert await ask("team-a") and not await ask("team-b")
    assert len(asker.asked) == 2  # both answers kept
    asker.allowed = {("alice", LOG, "team-b", "web")}  # the bindings changed
    clock.advance(DENIED_TTL)
    assert await ask("team-b")  # the refusal expired
    assert await ask("team-a")  # the allow still kept
    clock.advance(ALLOWED_TTL - DENIED_TTL)
    assert not await ask("team-a")  # the allow expired
    assert len(asker.asked) == 4


async def test_no_answer_is_no() -> None:
    clock = FakeClock()
    asker = Asker(set())
    asker.fail = Unavailable("connection refused")
    review = AccessReview(asker, clock=clock)
    with pytest.raises(
        ReviewUnavailable, match=r"^cannot ask the API server whether alice may read logs of project a/web: connection"
    ):
        await review.review(Identity("alice"), LOG, namespace="a", project="web")
    asker.fail, asker.hang = None, True
    asking = asyncio.create_task(review.review(Identity("alice"), LOG, namespace="a", project="web"))
    while clock.sleepers == 0:
        await asyncio.sleep(0)
    clock.advance(ASK_TIMEOUT)
    with pytest.raises(ReviewUnavailable):
        await asking


async def test_without_an_api_server_only_admin() -> None:
    review = AccessReview(None, clock=FakeClock())
    refused = await review.review(Identity("alice"), EXEC, namespace="a", project="web")
    assert not refused.allowed and "only admin may" in refused.message
    assert (await review.review(Identity("admin"), EXEC, namespace="a", project="web")).allowed
