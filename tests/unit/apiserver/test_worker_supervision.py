"""The pure parts of `cara-apiserver --workers N`: each worker's command line, the supervisor's merged metrics and
its health and readiness over the workers' answers, and `--metrics-listen` forms."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from caravanserai.apiserver.httpendpoint import parse_listen
from caravanserai.apiserver.workerendpoint import WorkerProbe, WorkersView
from caravanserai.apiserver.workers import worker_argv

WORKER_METRICS = """\
# HELP caravanserai_apiserver_requests_total API requests answered.
# TYPE caravanserai_apiserver_requests_total counter
caravanserai_apiserver_requests_total{code="OK",resource="projects",verb="Create"} %d.0
# HELP caravanserai_apiserver_watchers Open watches.
# TYPE caravanserai_apiserver_watchers gauge
caravanserai_apiserver_watchers{resource="projects"} 1.0
"""


class CannedProbe(WorkerProbe):
    """A worker's endpoint answering from a table (path → (status, body))."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        super().__init__("unused")
        self.answers = answers

    async def get(self, path: str) -> tuple[int, str]:
        return self.answers.get(path, (0, "does not answer"))


@dataclass
class FakeWorker:
    index: int
    probe: WorkerProbe
    restarts: int = 0
    running: bool = True


def _worker(index: int, creates: int, *, ready: bool = True) -> FakeWorker:
    answers = {
        "/metrics": (200, WORKER_METRICS % creates),
        "/healthz": (200, "ok\n"),
        "/readyz": (200, "ok\n") if ready else (503, "not ready: the watch caches are still filling\n"),
    }
    return FakeWorker(index, CannedProbe(answers))


def test_worker_command_lines_override_the_supervisors_flags() -> None:
    argv = ["--listen", "127.0.0.1:7420", "--workers", "2", "--metrics-listen", "127.0.0.1:7423"]
    first = worker_argv(argv, index=0, socket="/run/w0.sock")
    assert first[:3] == [sys.executable, "-m", "caravanserai.apiserver"]
    assert first[3:] == [*argv, "--workers", "1", "--worker-index", "0", "--metrics-listen", "unix:/run/w0.sock"]
    second = worker_argv(argv, index=1, socket="/run/w1.sock")
    assert second[3:] == [*argv, "--workers", "1", "--worker-index", "1", "--metrics-listen", "unix:/run/w1.sock"]
    assert "--compaction-interval" not in second  # every worker takes its turn (and trims its histories)


async def test_metrics_are_every_workers_with_a_worker_label() -> None:
    workers = [_worker(0, 3), _worker(1, 4)]
    workers[1].restarts = 2
    text = (await WorkersView(workers).exposition()).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip
    created = ("code", "OK"), ("resource", "projects"), ("verb", "Create")
    assert samples[("caravanserai_apiserver_requests_total", (*created, ("worker", "0")))] == 3
    assert samples[("caravanserai_apiserver_requests_total", (*created, ("worker", "1")))] == 4
    assert samples[("caravanserai_apiserver_worker_restarts_total", (("worker", "1"),))] == 2
    assert samples[("caravanserai_apiserver_worker_up", (("worker", "0"),))] == 1


async def test_a_silent_worker_is_down_in_metrics_and_makes_the_supervisor_unready() -> None:
    silent = FakeWorker(1, CannedProbe({}))
    view = WorkersView([_worker(0, 1), silent])
    text = (await view.exposition()).decode()
    up = {s.labels["worker"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
          if s.name == "caravanserai_apiserver_worker_up"}  # fmt: skip
    assert up == {"0": 1, "1": 0}
    assert await view.ready() == "worker 1: does not answer"
    assert await view.healthy() == "worker 1: does not answer"


async def test_health_and_readiness_need_every_worker() -> None:
    assert await WorkersView([_worker(0, 0), _worker(1, 0)]).ready() == ""
    assert await WorkersView([_worker(0, 0), _worker(1, 0)]).healthy() == ""
    starting = WorkersView([_worker(0, 0), _worker(1, 0, ready=False)])
    assert await starting.ready() == "worker 1: not ready: the watch caches are still filling"
    assert await starting.healthy() == ""
    stopped = _worker(0, 0)
    stopped.running = False
    assert await WorkersView([stopped]).healthy() == "worker 0 is not running"


@pytest.mark.parametrize("text, parsed", [
    ("off", None), ("", None), ("127.0.0.1:7423", ("127.0.0.1", 7423)), ("[::1]:9", ("::1", 9)),
    ("unix:/run/cara/w0.sock", "/run/cara/w0.sock"),
])  # fmt: skip
def test_metrics_listen_forms(text: str, parsed: object) -> None:
    assert parse_listen(text) == parsed


@pytest.mark.parametrize("text", ["unix:", "7423", "host:port", "127.0.0.1:70000"])
def test_bad_metrics_listen_names_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match="--metrics-listen"):
        parse_listen(text)
