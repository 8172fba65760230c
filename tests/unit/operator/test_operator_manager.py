"""An Operator under a real Manager whose client is the FakeClient: informers list and watch the fake, the
controller runs the handlers, and the operator's own metrics are served with the manager's."""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter

from caravanserai.controller import Manager
from caravanserai.customkinds.schemas import register
from caravanserai.operator import Context, Operator
from caravanserai.testing import FakeClient, running, wait_for
from support.customkinds import GROUP, webfarm, webfarm_messages

WebFarm = webfarm_messages().WebFarm
register(WebFarm, group=GROUP)


async def test_manager_runs_an_operator_over_the_fake_client() -> None:
    client = FakeClient()
    manager = Manager(client)
    handled = Counter("sets_handled", "Sets the operator handled.", registry=manager.registry)
    op: Operator[Any] = Operator("sets", WebFarm, client)

    @op.on_create()
    async def created(ctx: Context[Any]) -> None:
        handled.inc()
        ctx.status.replicas = ctx.obj.spec.replicas

    op.setup(manager)
    async with running(manager):
        await client.resource(WebFarm).create(webfarm("web", replicas=2))

        async def written() -> bool:
            return (await client.resource(WebFarm).get("web")).status.replicas == 2

        await wait_for(written, 10)
    text = manager.metrics_text()
    assert "sets_handled_total 1.0" in text
    assert 'caravanserai_controller_reconcile_total{controller="sets",result="success"}' in text
