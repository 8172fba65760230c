# Caravanserai: `make test` installs everything that is missing and runs the whole test suite;
# `make demo` installs everything and runs a project on a one-machine cluster.
.PHONY: test demo setup generate bench soak clean

test:
	scripts/test.sh

setup:
	scripts/setup.sh

generate:
	.venv/bin/python proto/generate.py

demo:
	scripts/demo.sh

# `make bench` installs what is missing, then prints one JSON line per performance goal (figure, target, verdict).
bench:
	scripts/setup.sh
	.venv/bin/python bench/run_all.py

# `make soak` (root; not part of `make test`): the fleet under a mixed workload with random faults for 30 minutes
# (SOAK_DURATION=5m for less), then a JSON report with one verdict per invariant; exits 1 when one is violated.
soak:
	scripts/setup.sh
	.venv/bin/python bench/soak.py $(if $(SOAK_OUTPUT),--output $(SOAK_OUTPUT))
