"""Run every benchmark in this folder, one after another, and print one JSON line per goal of the performance
issue: benchmark, goal, figure, target and verdict ("met", "not met", "not measured").

    .venv/bin/python bench/run_all.py [--details FILE] [NAME ...]    # e.g. apiserver scheduler; default: all

Benchmarks are not part of the test run: they start their own etcd (and apiserver, Docker containers …) on
loopback only, are bounded in time, and report ratios against the physical limit measured in the same run (raw
etcd, a bare grpc.aio relay, plain `docker run`, `tar` of the same bytes to the same disk). `--details FILE` writes
every benchmark's full JSON there. A benchmark that fails prints one line with its error and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent


def run(script: pathlib.Path) -> dict[str, Any]:
    """The benchmark's JSON, or {"error": last line of its stderr}."""
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    try:
        result: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        return {"error": "no JSON output", "output": done.stdout.strip()[-500:]}
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", help="write every benchmark's full JSON to this file")
    parser.add_argument("names", nargs="*", help="benchmarks to run (file names without bench_); default: all")
    opts = parser.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if opts.names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in opts.names]
    results: dict[str, object] = {}
    status = 0
    for script in scripts:
        name = script.stem.removeprefix("bench_")
        print(f"running {script.name} …", file=sys.stderr, flush=True)
        result = results[name] = run(script)
        if "error" in result:
            status = 1
            print(json.dumps({"benchmark": name, "error": result["error"]}), flush=True)
            continue
        for line in result.get("goals", []):
            print(json.dumps({"benchmark": name, **line}), flush=True)
    if opts.details:
        pathlib.Path(opts.details).write_text(json.dumps(results, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
