"""`client.apply.modify_status`: the read-modify-write of a status (the agent's background backups use it through
`agent.volumes.shared.write_status`) against a real apiserver: only the status is written, a change that changes
nothing writes nothing, and a write that loses a race is read again and redone."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.agent.volumes.shared import write_status
from caravanserai.client import Client
from caravanserai.client.apply import modify_status
from caravanserai.project import backups
from caravanserai.testing.builders import project


async def bound(client: Client, name: str) -> v1.Project:
    created = meta.copy(await client.projects.create(project(name)))
    created.status.node_ref = "n1"
    meta.set_phase(created, v1.SCHEDULED, reason="Scheduled", message="bound by the test", now=0.0)
    return await client.projects.update_status(created)


async def test_only_the_status_is_written_and_nothing_when_nothing_changes(client: Client) -> None:
    before = await bound(client, "quiet")

    def note(p: v1.Project) -> bool:
        backups.ensure_volume_status(p.status, "data").node = "n1"
        p.spec.priority = 99  # not written: UpdateStatus stores the status only
        return True

    written, changed = await modify_status(client.projects, "quiet", note)
    assert changed and written.spec.priority == 0 and written.status.volumes[0].node == "n1"
    again = await write_status(
        client, "quiet", lambda s: setattr(backups.ensure_volume_status(s, "data"), "node", "n1")
    )
    assert again.metadata.resource_version == written.metadata.resource_version  # unchanged: not written
    assert before.metadata.resource_version != written.metadata.resource_version


async def test_a_write_that_lost_a_race_is_read_again_and_redone(client: Client) -> None:
    await bound(client, "busy")
    attempts = []

    async def add_error(p: v1.Project) -> bool:
        attempts.append(p.metadata.resource_version)
        if len(attempts) == 1:  # someone else writes between our read and our write
            other = meta.copy(await client.projects.get("busy"))
            backups.ensure_volume_status(other.status, "logs").node = "n2"
            await client.projects.update_status(other)
        backups.ensure_volume_status(p.status, "data").last_error = "boom"
        return True

    written, changed = await modify_status(client.projects, "busy", add_error)
    assert changed and len(attempts) == 2 and attempts[0] != attempts[1]
    assert {v.name: (v.node, v.last_error) for v in written.status.volumes} == {
        "logs": ("n2", ""),
        "data": ("", "boom"),
    }
