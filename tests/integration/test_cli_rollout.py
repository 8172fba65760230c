"""`caractrl scale`, `rollout status|history|undo|pause|resume`, `get` and `describe` of ProjectSets against a real
apiserver with the ProjectSet controller and simulated agents; validation naming its field paths."""

from __future__ import annotations

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)
from cluster_sim import add_node
from replica_sim import NEVER_READY, simulated_agents
from test_projectset_rollouts import controllers, projectset, set_image

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import Invalid
from caravanserai.testing.wait import wait_for


async def test_scale_rollout_status_history_undo_pause_resume(cli: Caractrl, client: Client) -> None:
    await add_node(client, "n1")
    async with controllers(client), simulated_agents(client, ["n1"]):
        await client.projectsets.create(projectset(replicas=2))
        done = await cli("rollout", "status", "projectset/web", "--timeout", "20s")
        assert done.exit_code == 0, done.stderr
        assert 'projectset "web" successfully rolled out' in done.stdout
        scaled = await cli("scale", "projectset/web", "--replicas", "3")
        assert scaled.stdout.strip() == "projectset/web scaled"
        assert (await cli("rollout", "status", "ps", "web", "--timeout", "20s")).exit_code == 0
        table = (await cli("get", "projectsets")).stdout.splitlines()
        assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
        assert table[1].split()[:4] == ["web", "3/3", "3", "3"]
        await set_image(client, "busybox:v2")
        assert (await cli("rollout", "status", "projectset/web", "--timeout", "20s")).exit_code == 0
        listing = (await cli("rollout", "history", "projectset/web")).stdout
        assert "1 " in listing and "update" in listing
        undone = await cli("rollout", "undo", "projectset/web")
        assert undone.stdout.strip() == "projectset/web rolled back (to revision 1)"
        assert (await cli("rollout", "status", "projectset/web", "--timeout", "20s")).exit_code == 0
        first = (await client.projectsets.get("web")).status
        assert [r.revision for r in first.revisions] == [2, 3]  # revision 1 came back as 3
        assert (await cli("rollout", "pause", "projectset/web")).stdout.strip() == "projectset/web paused"
        assert (await client.projectsets.get("web")).spec.paused
        assert (await cli("rollout", "resume", "projectset/web")).stdout.strip() == "projectset/web resumed"
        described = (await cli("describe", "projectset", "web")).stdout
        assert "RollingUpdate (maxSurge 25% = 1, maxUnavailable 25% = 0)" in described and "Revisions" in described


async def test_rollout_status_exits_1_when_the_deadline_passes(cli: Caractrl, client: Client) -> None:
    await add_node(client, "n1")
    async with controllers(client), simulated_agents(client, ["n1"]):
        obj = projectset(replicas=1)
        obj.spec.progress_deadline_seconds = 1
        await client.projectsets.create(obj)
        await wait_for(lambda: _available(client), 10)
        await set_image(client, f"busybox:{NEVER_READY}")
        failed = await cli("rollout", "status", "projectset/web", "--timeout", "20s")
        assert failed.exit_code == 1 and 'projectset "web" exceeded its progress deadline' in failed.stderr


async def _available(client: Client) -> bool:
    return (await client.projectsets.get("web")).status.available_replicas == 1


async def test_validation_names_the_field(client: Client) -> None:
    bad = projectset(replicas=-1)
    bad.spec.selector.match_labels["app"] = "other"
    bad.spec.strategy.rolling_update.max_surge = "150%"
    bad.spec.strategy.rolling_update.max_unavailable = "x"
    bad.spec.disruption_budget.min_available = "1"
    bad.spec.disruption_budget.max_unavailable = "1"
    bad.spec.template.spec.services[0].image = ""
    try:
        await client.projectsets.create(bad)
    except Invalid as exc:
        fields = {v.field for v in exc.violations}
    else:
        raise AssertionError("accepted")
    assert {
        "spec.replicas",
        "spec.template.labels",
        "spec.strategy.rollingUpdate.maxSurge",
        "spec.strategy.rollingUpdate.maxUnavailable",
        "spec.disruptionBudget",
        "spec.template.spec.services[0].image",
    } <= fields
    recreate = projectset()
    recreate.spec.strategy.type = v1.RECREATE
    recreate.spec.strategy.rolling_update.max_surge = "1"
    try:
        await client.projectsets.create(recreate)
    except Invalid as exc:
        assert [v.field for v in exc.violations] == ["spec.strategy.rollingUpdate"]
    else:
        raise AssertionError("accepted")
