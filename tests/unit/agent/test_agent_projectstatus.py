"""Agent status mapping: observed container states → project phase and service statuses (table-tested)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.agent.docker.records import Observed, observe
from caravanserai.agent.workload import projectstatus


def spec(*services: tuple[str, str]) -> v1.ProjectSpec:
    out = v1.ProjectSpec()
    for name, policy in services:
        out.services.add(name=name, image="img", restart_policy=policy)
    return out


def seen(service: str, state: str, code: int = 0, **extra: Any) -> Observed:
    return Observed(service=service, container_id=f"id-{service}", status=state, exit_code=code, **extra)


@pytest.mark.parametrize(
    ("policy", "state", "code", "ended", "start"),
    [
        ("Never", "exited", 0, True, False),
        ("Never", "exited", 2, True, False),
        ("OnFailure", "exited", 0, True, False),
        ("OnFailure", "exited", 1, False, True),
        ("Always", "exited", 0, False, True),
        ("", "exited", 137, False, True),
        ("Always", "dead", 0, True, False),
        ("Never", "created", 0, False, True),
        ("Always", "running", 0, False, False),
        ("OnFailure", "restarting", 1, False, False),
        ("Never", "paused", 0, False, False),
    ],
)
def test_end_and_start_rules(policy: str, state: str, code: int, ended: bool, start: bool) -> None:
    service = spec(("s", policy)).services[0]
    observed = seen("s", state, code)
    assert projectstatus.ended_for_good(service, observed) is ended
    assert projectstatus.needs_start(service, observed) is start


@pytest.mark.parametrize(
    ("services", "observed", "phase", "reason", "ready", "not_ready"),
    [
        ([("a", ""), ("b", "")], [("a", "running", 0), ("b", "running", 0)], v1.RUNNING, "ContainersRunning", True, ()),
        ([("a", ""), ("b", "")], [("a", "running", 0)], None, "", False, ("b",)),
        ([("a", "")], [("a", "restarting", 1)], None, "", False, ("a",)),
        (
            [("a", ""), ("b", "Never")],
            [("a", "running", 0), ("b", "exited", 3)],
            v1.FAILED,
            "ContainerExited",
            False,
            ("b",),
        ),
        ([("a", "OnFailure")], [("a", "exited", 0)], v1.SUCCEEDED, "Completed", True, ()),
        (
            [("a", "Never"), ("b", "OnFailure")],
            [("a", "exited", 0), ("b", "exited", 0)],
            v1.SUCCEEDED,
            "Completed",
            True,
            (),
        ),
        (
            [("a", "Never"), ("b", "")],
            [("a", "exited", 0), ("b", "running", 0)],
            v1.RUNNING,
            "ContainersRunning",
            True,
            (),
        ),
        ([("a", "Never"), ("b", "")], [("a", "exited", 0)], None, "", False, ("b",)),
        (
            [("a", "Never"), ("b", "Never")],
            [("a", "exited", 0), ("b", "exited", 1)],
            v1.FAILED,
            "ContainerExited",
            False,
            ("b",),
        ),
        ([("a", "OnFailure")], [("a", "exited", 1)], None, "", False, ("a",)),
        ([("a", "")], [("a", "created", 0)], None, "", False, ("a",)),
    ],
)
def test_assess_table(
    services: list[tuple[str, str]],
    observed: list[tuple[str, str, int]],
    phase: str | None,
    reason: str,
    ready: bool,
    not_ready: tuple[str, ...],
) -> None:
    verdict = projectstatus.assess(spec(*services), {name: seen(name, state, code) for name, state, code in observed})
    assert (verdict.phase, verdict.reason, verdict.ready, verdict.not_ready) == (phase, reason, ready, not_ready)
    assert [s.name for s in verdict.services] == [name for name, _ in services]


def test_exit_message_names_service_code_and_policy() -> None:
    verdict = projectstatus.assess(spec(("job", "Never")), {"job": seen("job", "exited", 3)})
    assert verdict.message == "service job exited with code 3 (restart policy Never)"
    oom = projectstatus.assess(spec(("job", "Never")), {"job": seen("job", "exited", 137, oom_killed=True)})
    assert "exited with code 137 (out of memory)" in oom.message


def test_service_status_fields() -> None:
    service = spec(("web", "")).services[0]
    pending = projectstatus.service_status(service, None)
    assert (pending.state, pending.ready, pending.image) == ("pending", False, "img")
    running = projectstatus.service_status(
        service, seen("web", "running", restart_count=2, image="img:2", generation=4)
    )
    assert (running.container_id, running.state, running.ready, running.restart_count) == ("id-web", "running", True, 2)
    assert (running.image, running.generation, running.message) == ("img:2", 4, "")
    exited = projectstatus.service_status(service, seen("web", "exited", 1, error="boom"))
    assert exited.message == "exited with code 1: boom" and exited.exit_code == 1


def test_apply_records_phase_ready_and_generation() -> None:
    project = v1.Project()
    project.status.phase = v1.SCHEDULED
    verdict = projectstatus.assess(spec(("a", "")), {"a": seen("a", "running")})
    project = projectstatus.apply(project, verdict, generation=2, now=100.0)
    assert project.status.phase == v1.RUNNING
    phase = meta.get_condition(project.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and (phase.reason, phase.message) == ("ContainersRunning", "1 container running")
    ready = meta.get_condition(project.status.conditions, v1.CONDITION_READY)
    assert ready is not None and ready.status == v1.TRUE
    assert project.status.observed_generation == 2
    assert [s.name for s in project.status.services] == ["a"]

    before = v1.Project()
    before.CopyFrom(project)
    project = projectstatus.apply(project, verdict, generation=2, now=200.0)
    assert project == before  # the same verdict again changes nothing, not even timestamps


def test_a_hand_off_ends_when_the_new_copy_is_ready() -> None:
    moved = v1.Project()
    moved.status.phase, moved.status.node_ref, moved.status.previous_node_ref = v1.SCHEDULED, "n2", "n1"
    moved.status.handoff_deadline.seconds = 500
    checked = spec(("a", ""))
    checked.services[0].healthcheck.tcp.port = 80
    starting = projectstatus.assess(checked, {"a": seen("a", "running", health="starting")})
    running = projectstatus.apply(moved, starting, generation=None, now=1.0)
    assert (running.status.phase, running.status.previous_node_ref) == (v1.RUNNING, "n1")  # the old copy serves on
    healthy = projectstatus.assess(checked, {"a": seen("a", "running", health="healthy")})
    ready = projectstatus.apply(running, healthy, generation=None, now=2.0)
    assert (ready.status.phase, ready.status.previous_node_ref) == (v1.RUNNING, "")
    assert not ready.status.HasField("handoff_deadline")


def test_apply_keeps_phase_when_verdict_has_none() -> None:
    project = v1.Project()
    project.status.phase = v1.RUNNING
    verdict = projectstatus.assess(spec(("a", "")), {"a": seen("a", "restarting", 1)})
    project = projectstatus.apply(project, verdict, generation=None, now=1.0)
    assert project.status.phase == v1.RUNNING
    ready = meta.get_condition(project.status.conditions, v1.CONDITION_READY)
    assert ready is not None and (ready.status, ready.message) == (v1.FALSE, "not ready: a")
    assert project.status.observed_generation == 0


def test_failure_verdict() -> None:
    verdict = projectstatus.failure(spec(("a", "")), {}, reason="ImagePullFailed", message="service a: no such host")
    assert (verdict.phase, verdict.reason, verdict.message) == (v1.FAILED, "ImagePullFailed", "service a: no such host")
    assert verdict.services[0].state == "pending"


def test_observe_reads_an_inspect_document() -> None:
    info = {
        "Id": "abc",
        "RestartCount": 2,
        "State": {"Status": "exited", "ExitCode": 3, "Error": "", "OOMKilled": False},
        "Config": {
            "Image": "img",
            "Labels": {
                "caravanserai.io/service": "web",
                "caravanserai.io/generation": "5",
                "caravanserai.io/spec-hash": "h",
                "caravanserai.io/project-uid": "u",
                "caravanserai.io/node": "n1",
            },
        },
    }
    assert observe(info) == Observed(
        service="web",
        container_id="abc",
        status="exited",
        exit_code=3,
        restart_count=2,
        image="img",
        generation=5,
        spec_hash="h",
        project_uid="u",
        node="n1",
    )


def test_summaries_read_docker_listings() -> None:
    from caravanserai.agent.docker import records

    container = records.container_summary(
        {"Id": "c1", "Names": ["/cara_p_s_n"], "State": "running", "Labels": {"caravanserai.io/project": "p"}}
    )
    assert (container.id, container.names, container.state) == ("c1", ("/cara_p_s_n",), "running")
    assert container.project == "default/p"  # labelled before namespaces: `default`
    assert container.label("caravanserai.io/service") == ""
    assert container.networks == ()
    configured = {"Networks": {"cara_pool.ab_n": {"NetworkID": ""}, "b": {}}}  # a created container: no NetworkID yet
    assert records.container_summary({"Id": "c2", "NetworkSettings": configured}).networks == ("b", "cara_pool.ab_n")
    network = records.network_summary({"Id": "n1", "Name": "cara_p_n", "Labels": None})
    assert (network.id, network.name, network.project) == ("n1", "cara_p_n", "")
    volume = records.volume_summary({"Name": "v", "Labels": {"caravanserai.io/project": "q"}})
    assert (volume.name, volume.project) == ("v", "default/q")


def test_completed_crashloop_health_and_degraded() -> None:
    jobs = spec(("job", "Never"), ("web", ""))
    jobs.services[1].healthcheck.tcp.port = 80
    now = 1000.0
    context = projectstatus.Context(now=now)
    looping = seen("web", "running", restart_count=4, started_at=now - 1, finished_at=now - 1.5)
    verdict = projectstatus.assess(jobs, {"job": seen("job", "exited", 0), "web": looping}, context)
    job, web = verdict.services
    assert (job.state, job.ready) == ("completed", False)
    assert (web.state, web.ready, web.restart_count) == ("crashloop", False, 4)
    assert verdict.degraded is not None and verdict.degraded[0] == "CrashLoop"
    assert verdict.phase is None  # a crash loop is not Running

    stable = seen("web", "running", restart_count=4, started_at=now - 30, finished_at=now - 31, health="healthy")
    verdict = projectstatus.assess(jobs, {"job": seen("job", "exited", 0), "web": stable}, context)
    assert (verdict.phase, verdict.ready, verdict.degraded) == (v1.RUNNING, True, None)
    assert verdict.message == "1 container running, 1 completed"

    sick = seen("web", "running", health="unhealthy")
    verdict = projectstatus.assess(jobs, {"job": seen("job", "exited", 0), "web": sick}, context)
    assert verdict.services[1].health == "unhealthy" and not verdict.services[1].ready
    assert verdict.degraded is not None and verdict.degraded[0] == "Unhealthy"
    restarted = projectstatus.Context(now=now, health_restarted={"web"}, agent_restarts={"web": 2})
    starting = seen("web", "running", health="starting", restart_count=1)
    verdict = projectstatus.assess(jobs, {"job": seen("job", "exited", 0), "web": starting}, restarted)
    assert verdict.services[1].restart_count == 3  # Docker's 1 + the agent's 2
    assert verdict.degraded is not None and verdict.degraded[0] == "Unhealthy"  # not healthy since its restart


def test_last_exit_code_is_kept_across_restarts_and_waiting_services_say_why() -> None:
    web = spec(("web", "")).services[0]
    died = projectstatus.service_status(web, seen("web", "restarting", 3, finished_at=5.0))
    assert died.last_exit_code == 3
    previous = {"web": died}
    running = projectstatus.service_status(
        web, seen("web", "running", 0, finished_at=5.0), projectstatus.Context(previous=previous)
    )
    assert running.last_exit_code == 3
    waiting = projectstatus.service_status(web, None, projectstatus.Context(waiting={"web": "db to be healthy"}))
    assert (waiting.state, waiting.waiting_for, waiting.message) == (
        "waiting",
        "db to be healthy",
        "waiting for db to be healthy",
    )
    # The old container still runs while its replacement waits (a start-first one that did not become healthy).
    why = "a healthy replacement: service web: its new container did not pass its health check within 4s"
    held = projectstatus.service_status(
        web, seen("web", "running", 0, health="healthy"), projectstatus.Context(waiting={"web": why})
    )
    assert (held.state, held.ready, held.container_id) == ("running", True, "id-web")
    assert (held.waiting_for, held.message) == (why, f"waiting for {why}")


@pytest.mark.parametrize(
    ("status", "restarts", "started", "finished", "now", "looping"),
    [
        ("running", 3, 999.0, 998.0, 1000.0, True),  # restarted again a moment ago
        ("restarting", 5, 990.0, 999.0, 1000.0, True),
        ("running", 3, 980.0, 979.0, 1000.0, False),  # ran 20 s since the last exit: stable
        ("running", 2, 999.0, 998.0, 1000.0, False),  # not enough restarts
        ("exited", 9, 800.0, 900.0, 1000.0, False),  # the last exit is older than the window
        ("running", 3, 999.0, 998.0, 0.0, False),  # the time is not known
    ],
)
def test_crash_loop_rule(
    status: str, restarts: int, started: float, finished: float, now: float, looping: bool
) -> None:
    observed = seen("app", status, 1, started_at=started, finished_at=finished)
    assert projectstatus.crash_looping(observed, restarts, now) is looping


def test_the_exit_code_of_a_die_event_outlives_the_restart() -> None:
    web = spec(("web", "")).services[0]
    # Docker restarted the container before the agent looked: its inspect says running, exit code 0.
    running = seen("web", "running", 0, restart_count=1, finished_at=5.0)
    assert projectstatus.service_status(web, running).last_exit_code == 0
    told = projectstatus.Context(last_exits={"web": 3})  # the die event said 3
    status = projectstatus.service_status(web, running, told)
    assert (status.exit_code, status.last_exit_code) == (0, 3)


def test_holdup_names_what_services_wait_for() -> None:
    assert projectstatus.holdup({}) is None
    stuck = {"web": "network: refused", "db": "network: refused", "app": 'secret "db" (not found)'}
    reason, message = projectstatus.holdup(stuck, reason="NetworkFailed") or ("", "")
    assert reason == "NetworkFailed"
    assert (
        message == 'waiting for secret "db" (not found) (service app); waiting for network: refused (services db, web)'
    )


def test_a_scheduled_project_says_what_holds_it_up_until_nothing_does() -> None:
    project = v1.Project()
    meta.set_phase(project, v1.SCHEDULED, reason="Scheduled", message="Bound to node n1", now=1.0)
    meta.set_condition(project.status.conditions, v1.CONDITION_SCHEDULED, v1.TRUE, reason="Scheduled",
                       message="Bound to node n1", now=1.0)  # fmt: skip
    held = projectstatus.assess(spec(("app", "")), {}, projectstatus.Context(waiting={"app": 'secret "x" (not found)'}))
    held = dataclasses.replace(held, holdup=("Waiting", 'waiting for secret "x" (not found) (service app)'))
    waiting = projectstatus.apply(project, held, generation=None, now=2.0)
    phase = meta.get_condition(waiting.status.conditions, v1.CONDITION_PHASE)
    assert waiting.status.phase == v1.SCHEDULED
    assert phase is not None and (phase.reason, phase.message) == ("Waiting", held.holdup[1] if held.holdup else "")

    starting = projectstatus.assess(spec(("app", "")), {"app": seen("app", "created")})
    bound = projectstatus.apply(waiting, starting, generation=None, now=3.0)
    phase = meta.get_condition(bound.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and (phase.reason, phase.message) == ("Scheduled", "Bound to node n1")
