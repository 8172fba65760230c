"""The soak test (`make soak`, `bench/soak.py`): the fleet harness (`support.fleet`) under a mixed workload with
faults injected at random, and the invariants checked while it runs and at the end. `run_soak(config, clock=…)`
returns the JSON-ready report; see `run` for the order of things and each module for its guarantees."""

from support.soak.config import SoakConfig, parse_duration
from support.soak.faults import KINDS, FaultEvent, FaultInjector
from support.soak.run import run_soak

__all__ = ["KINDS", "FaultEvent", "FaultInjector", "SoakConfig", "parse_duration", "run_soak"]
