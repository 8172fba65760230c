"""Create is exact across lost replies: a client proposes the uid, the server keeps it, and a repeated Create
after an ambiguous failure recognises its own object."""

from __future__ import annotations

import uuid

import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import AlreadyExists, Invalid, Unavailable
from caravanserai.meta import wrap
from caravanserai.testing.builders import project


async def test_a_proposed_uid_is_kept_and_a_fresh_one_made_otherwise(client: Client) -> None:
    mine = str(uuid.uuid4())
    wanted = project("uid-given")
    wanted.metadata.uid = mine
    assert (await client.projects.create(wanted)).metadata.uid == mine
    created = await client.projects.create(project("uid-fresh"))
    assert str(uuid.UUID(created.metadata.uid)) == created.metadata.uid


async def test_a_uid_that_is_not_a_uuid_is_refused_naming_the_field(client: Client) -> None:
    wanted = project("uid-bad")
    wanted.metadata.uid = "not-a-uuid"
    with pytest.raises(Invalid) as info:
        await client.projects.create(wanted)
    assert "metadata.uid" in str(info.value)


async def test_lost_reply_of_a_create_is_recognised_by_its_uid(client: Client) -> None:
    """What the client does after an ambiguous failure: the object stored with its uid is its own; one stored
    with another uid is somebody else's (AlreadyExists)."""
    wanted = project("uid-retry")
    wanted.metadata.uid = str(uuid.uuid4())
    stored = await client.projects.create(wanted)  # the attempt whose reply was "lost"
    request_uid = wanted.metadata.uid
    request = v1.CreateRequest(resource="projects", object=wrap(wanted))
    again = await client.projects._create_after_ambiguity(  # noqa: SLF001 - the recovery path itself
        request, "uid-retry", request_uid, error=_unavailable()
    )
    assert again == stored
    with pytest.raises(AlreadyExists):
        await client.projects._create_after_ambiguity(  # noqa: SLF001
            request, "uid-retry", str(uuid.uuid4()), error=_unavailable()
        )


def _unavailable() -> Unavailable:
    return Unavailable("lost")
