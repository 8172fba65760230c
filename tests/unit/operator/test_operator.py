"""The handler layer on the FakeClient: create/update/resume/delete handlers, filters, the automatic finalizer,
timers on the injected clock, daemons, retries without tracebacks, status writes with conflict retry."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog.testing

from caravanserai import meta
from caravanserai.controller import Result
from caravanserai.customkinds.schemas import register
from caravanserai.errors import NotFound
from caravanserai.operator import (
    Context,
    Operator,
    PermanentError,
    Requeue,
    TemporaryError,
    field_changed,
    labels_changed,
    when,
)
from caravanserai.testing import FakeClient, FakeClock
from support.customkinds import GROUP, webfarm, webfarm_messages

WebFarm = webfarm_messages().WebFarm
register(WebFarm, group=GROUP)


@pytest.fixture
def op(fake_client: FakeClient, fake_clock: FakeClock) -> Operator[Any]:
    return Operator("sets", WebFarm, fake_client, clock=fake_clock)


async def noop(ctx: Context[Any]) -> None:
    """A change handler that does nothing."""


async def create(client: FakeClient, name: str = "web", **kwargs: Any) -> Any:
    return await client.resource(WebFarm).create(webfarm(name, **kwargs))


async def test_create_runs_once_and_update_runs_on_a_change(op: Operator[Any], fake_client: FakeClient) -> None:
    calls: list[str] = []

    @op.on_create()
    async def created(ctx: Context[Any]) -> None:
        calls.append(f"create {ctx.obj.spec.replicas}")

    @op.on_update()
    async def updated(ctx: Context[Any]) -> None:
        calls.append(f"update {ctx.diff}")

    await create(fake_client)
    assert await op.reconcile("web") == Result()
    assert await op.reconcile("web") == Result()  # the handled state is recorded: nothing again
    stored = await fake_client.resource(WebFarm).get("web")
    stored.spec.replicas = 3
    await fake_client.resource(WebFarm).update(stored)
    await op.reconcile("web")
    await op.reconcile("web")
    assert calls == ["create 1", "update ('spec.replicas',)"]


async def test_filters_choose_the_update_handlers(op: Operator[Any], fake_client: FakeClient) -> None:
    calls: list[str] = []

    @op.on_update(when=field_changed("spec.replicas"))
    async def scaled(ctx: Context[Any]) -> None:
        calls.append("scaled")

    @op.on_update(when=[labels_changed, when(lambda obj: obj.metadata.labels.get("team") == "a")])
    async def relabelled(ctx: Context[Any]) -> None:
        calls.append("relabelled")

    await create(fake_client)
    await op.reconcile("web")
    sets = fake_client.resource(WebFarm)
    obj = await sets.get("web")
    obj.metadata.labels["team"] = "a"
    await sets.update(obj)
    await op.reconcile("web")
    obj = await sets.get("web")
    obj.spec.replicas = 2
    await sets.update(obj)
    await op.reconcile("web")
    assert calls == ["relabelled", "scaled"]


async def test_resume_runs_once_per_process_for_handled_objects(fake_client: FakeClient, fake_clock: FakeClock) -> None:
    first: Operator[Any] = Operator("sets", WebFarm, fake_client, clock=fake_clock)
    first.on_create()(noop)  # an operator without change handlers records no handled state
    await create(fake_client)
    await first.reconcile("web")  # handled by an earlier process
    again: Operator[Any] = Operator("sets", WebFarm, fake_client, clock=fake_clock)
    resumed: list[str] = []

    @again.on_resume()
    async def resume(ctx: Context[Any]) -> None:
        resumed.append(ctx.name)

    await again.reconcile("web")
    await again.reconcile("web")
    assert resumed == ["web"]


async def test_delete_handlers_get_a_finalizer_removed_after_they_succeed(
    op: Operator[Any], fake_client: FakeClient
) -> None:
    cleaned: list[str] = []

    @op.on_delete()
    async def cleanup(ctx: Context[Any]) -> None:
        if not cleaned:
            cleaned.append("tried")
            raise TemporaryError("the bucket is busy", delay=7)
        cleaned.append(ctx.name)

    await create(fake_client)
    await op.reconcile("web")
    sets = fake_client.resource(WebFarm)
    assert (await sets.get("web")).metadata.finalizers == [op.finalizer]
    await sets.delete("web")
    assert await op.reconcile("web") == Result(requeue_after=7)
    assert (await sets.get("web")).metadata.HasField("deletion_timestamp")
    assert await op.reconcile("web") == Result()
    with pytest.raises(NotFound):
        await sets.get("web")
    assert cleaned == ["tried", "web"]


async def test_errors_retry_or_stop_without_a_traceback(op: Operator[Any], fake_client: FakeClient) -> None:
    runs: list[str] = []

    @op.on_create()
    async def flaky(ctx: Context[Any]) -> Requeue | None:
        runs.append("flaky")
        if runs.count("flaky") == 1:
            raise TemporaryError("not yet", delay=5)
        if runs.count("flaky") == 2:
            return Requeue(after=2)
        return None

    @op.on_create()
    async def hopeless(ctx: Context[Any]) -> None:
        runs.append("hopeless")
        raise PermanentError("spec.replicas: cannot be served")

    await create(fake_client)
    with structlog.testing.capture_logs() as logs:
        assert await op.reconcile("web") == Result(requeue_after=5)
        assert await op.reconcile("web") == Result(requeue_after=2)
        assert await op.reconcile("web") == Result()
        assert await op.reconcile("web") == Result()
    assert runs == ["flaky", "hopeless", "flaky", "flaky"]  # a handler done (or given up) is not called again
    assert not any("exc_info" in entry or "exception" in entry for entry in logs)
    levels = [(e["log_level"], e["event"]) for e in logs if e["log_level"] in ("warning", "error")]
    assert levels == [
        ("warning", "handler failed temporarily; retrying"),
        ("error", "handler failed permanently; not retrying"),
    ]


async def test_a_bug_propagates_to_the_controller(op: Operator[Any], fake_client: FakeClient) -> None:
    @op.on_create()
    async def broken(ctx: Context[Any]) -> None:
        raise KeyError("oops")

    await create(fake_client)
    with pytest.raises(KeyError):
        await op.reconcile("web")


async def test_timer_runs_every_interval_of_the_object(
    op: Operator[Any], fake_client: FakeClient, fake_clock: FakeClock
) -> None:
    ticks: list[float] = []

    @op.timer(interval=lambda obj: obj.spec.replicas * 10.0, initial_delay=1.0)
    async def tick(ctx: Context[Any]) -> None:
        ticks.append(fake_clock.monotonic())
        ctx.status.replicas += 1

    await create(fake_client, replicas=3)
    assert await op.reconcile("web") == Result(requeue_after=1.0)
    fake_clock.advance(1.0)
    assert await op.reconcile("web") == Result(requeue_after=30.0)
    fake_clock.advance(12.0)
    assert await op.reconcile("web") == Result(requeue_after=18.0)
    fake_clock.advance(18.0)
    await op.reconcile("web")
    assert ticks == [1.0, 31.0]
    assert (await fake_client.resource(WebFarm).get("web")).status.replicas == 2
    await fake_client.resource(WebFarm).delete("web")
    assert await op.reconcile("web") == Result()  # gone: the timer stops
    fake_clock.advance(100.0)
    assert await op.reconcile("web") == Result()
    assert len(ticks) == 2


async def test_status_write_retries_a_conflict(op: Operator[Any], fake_client: FakeClient) -> None:
    sets = fake_client.resource(WebFarm)

    @op.on_create()
    async def count(ctx: Context[Any]) -> None:
        ctx.status.ready_replicas = 1
        other = await sets.get(ctx.name)  # someone writes meanwhile: the status write meets a Conflict
        other.metadata.labels["touched"] = "yes"
        await sets.update(other)

    await create(fake_client)
    await op.reconcile("web")
    stored = await sets.get("web")
    assert stored.status.ready_replicas == 1 and stored.metadata.labels["touched"] == "yes"


async def test_daemon_runs_while_the_object_exists(op: Operator[Any], fake_client: FakeClient) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    @op.daemon()
    async def watch_it(ctx: Context[Any]) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    await create(fake_client)
    await op.reconcile("web")
    await asyncio.wait_for(started.wait(), 5)
    assert op.daemons.running("web") == ["watch_it"]
    await fake_client.resource(WebFarm).delete("web")
    await op.reconcile("web")
    assert stopped.is_set() and op.daemons.running("web") == []
    await op.close()


async def test_own_names_the_handled_object(op: Operator[Any], fake_client: FakeClient) -> None:
    @op.on_create()
    async def make_child(ctx: Context[Any]) -> None:
        child = webfarm(f"{ctx.name}-child")
        await ctx.client.resource(WebFarm).create(ctx.own(child))

    owner = await create(fake_client)
    await op.reconcile("web")
    child = await fake_client.resource(WebFarm).get("web-child")
    assert meta.controller_of(child).uid == owner.metadata.uid
    await fake_client.resource(WebFarm).delete("web")
    await op.reconcile("web")
    assert [s.metadata.name for s in await fake_client.resource(WebFarm).list()] == []


async def test_a_resume_handler_that_failed_is_called_again(fake_client: FakeClient, fake_clock: FakeClock) -> None:
    await create(fake_client)
    earlier: Operator[Any] = Operator("sets", WebFarm, fake_client, clock=fake_clock)
    earlier.on_create()(noop)
    await earlier.reconcile("web")
    op: Operator[Any] = Operator("sets", WebFarm, fake_client, clock=fake_clock)
    calls: list[str] = []

    @op.on_resume()
    async def resume(ctx: Context[Any]) -> None:
        calls.append("resume")
        if len(calls) == 1:
            raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        await op.reconcile("web")
    await op.reconcile("web")
    await op.reconcile("web")
    assert calls == ["resume", "resume"]


def test_operator_names_must_fit_a_finalizer(fake_client: FakeClient) -> None:
    with pytest.raises(ValueError, match="operator name 'Bad Name'"):
        Operator("Bad Name", WebFarm, fake_client)
    with pytest.raises(ValueError, match="already has a handler 'twice'"):
        op: Operator[Any] = Operator("ok", WebFarm, fake_client)

        async def twice(ctx: Context[Any]) -> None: ...

        op.on_create()(twice)
        op.on_update()(twice)


async def test_a_zero_interval_turns_the_timer_off(op: Operator[Any], fake_client: FakeClient) -> None:
    ticks: list[str] = []

    @op.timer(interval=lambda obj: obj.spec.replicas)
    async def tick(ctx: Context[Any]) -> None:
        ticks.append(ctx.name)

    await create(fake_client, replicas=0)
    assert await op.reconcile("web") == Result()
    assert ticks == []
