"""The soak test in small (`make soak` runs it for 30 minutes): the four-agent fleet under the mixed workload for
a minute with three faults (an apiserver and an agent killed, a worker's link cut past the heartbeat timeout), so
the soak's own code keeps working. Every invariant must hold and the report must carry its figures. Needs root
(network namespaces): skipped with the reason otherwise, like the fleet tier."""

from __future__ import annotations

import json

import pytest

from caravanserai.clock import SystemClock
from support.fleet import NamespacesUnavailable, check_available
from support.soak import SoakConfig, run_soak

pytestmark = [pytest.mark.fleet, pytest.mark.docker, pytest.mark.timeout(420)]

SMOKE = SoakConfig(
    duration=60.0,
    seed=29,
    fault_interval=(12.0, 18.0),
    fault_kinds=("kill-apiserver", "kill-agent", "cut"),
    max_faults=3,
    max_projects=6,
    convergence_bound=90.0,
)


@pytest.fixture(scope="module")
def namespaces() -> None:
    try:
        check_available()
    except NamespacesUnavailable as exc:
        pytest.skip(f"soak smoke skipped: {exc}")


@pytest.mark.usefixtures("namespaces")
async def test_a_short_soak_holds_every_invariant_and_reports_its_figures() -> None:
    report = await run_soak(SMOKE, clock=SystemClock(), say=print)
    text = json.dumps(report, indent=2)
    print(text)
    verdicts = {line["invariant"]: line["verdict"] for line in report["invariants"]}
    assert set(verdicts.values()) == {"held"}, text
    assert report["verdict"] == "pass"
    assert report["faults"]["injected"] >= 2
    assert set(report["faults"]["by_type"]) <= {"kill-apiserver", "kill-agent", "cut"}
    assert report["writes"]["acknowledged"] > 10 and report["writes"]["lost"] == 0
    assert report["convergence"]["after_last_fault_s"] is not None
    assert {"agent-w3", "apiserver-cp0", "etcd-m2", "controllers-cp1"} <= set(report["resources"]["processes"])
    assert not any(report["leftovers"].values())
