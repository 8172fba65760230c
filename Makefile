# Caravanserai: `make test` installs everything that is missing and runs the whole test suite;
# `make demo` installs everything and runs a project on a one-machine cluster.
.PHONY: test demo setup generate bench clean

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
