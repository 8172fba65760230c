"""Run every benchmark in this folder, one after another, and print their JSON results as one JSON object.

    .venv/bin/python bench/run_all.py [NAME ...]     # e.g. apiserver scheduler; default: all

Benchmarks are not part of the test run: they start their own etcd (and apiserver, Docker containers …) and
report ratios against the physical limit measured in the same run (raw etcd, plain `docker run`).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    results: dict[str, object] = {}
    status = 0
    for script in scripts:
        print(f"running {script.name} …", file=sys.stderr)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            status = 1
            results[script.stem] = {"error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
            continue
        try:
            results[script.stem] = json.loads(done.stdout)
        except ValueError:
            results[script.stem] = {"output": done.stdout.strip()}
    print(json.dumps(results, indent=2))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
