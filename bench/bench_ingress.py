"""The ingress and port-forward against the direct path, in the same run, on the same container. Prints JSON.

    .venv/bin/python bench/bench_ingress.py [--duration 3] [--rounds 3] [--connections 16] [--blob-mib 64]

One etcd, one `cara-apiserver` and two `cara-agent` processes (nodes A and B, one Docker engine). A busybox httpd
project runs on A with its port published on 127.0.0.1 and an ingress `web.bench.local`. `wrk` (Debian package
`wrk`) loads the same page three ways, in turn and for several rounds: straight to the published port, through
A's ingress (local route), and through B's ingress (one cross-node hop to A). Each is loaded twice: with
`--connections` at once (saturation: the requests/s ratio) and with one connection (a request at a time: the
latency a hop adds, with no queueing in it). Reported: requests/s and latency percentiles of each, the
ingress/direct requests/s ratio, the p50 latency the ingress and the cross-node hop add, and, for reference, the
p50 differences at saturation (there p50 is mostly queueing, about connections ÷ requests/s). Then
a `--blob-mib` file is downloaded through `caractrl port-forward` and straight from the published port: MiB/s
of each (best of three). busybox httpd closes every connection after one response, so each request also pays a
TCP connect to the container in every path; the client keeps its connection to the ingress alive.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import structlog
from benchlib import free_port, goal, wait_until

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.testing import EtcdServer, ensure_test_image
from caravanserai.testing.builders import project

NODES = ("bench-ingress-a", "bench-ingress-b")
HOST = "web.bench.local"
BIN = os.path.dirname(sys.executable)


def spawn(args: list[str], log_path: str) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log_file:
        return subprocess.Popen([os.path.join(BIN, args[0]), *args[1:]], stdout=subprocess.PIPE, stderr=log_file)


def web_project(image: str, host_port: int, blob_mib: int) -> v1.Project:
    serve = (
        f"busybox dd if=/dev/zero of=/tmp/blob bs=1048576 count={blob_mib} 2>/dev/null; "
        "echo ok > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"
    )
    p = project("bench", image=image, services=["web"], command=["sh", "-c", serve])
    p.spec.services[0].ports.add(container_port=8080, host_port=host_port, host_ip="127.0.0.1")
    ingress = p.spec.ingress.add(name="site", host="web")
    ingress.target.service, ingress.target.port = "web", 8080
    return p


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def parse_wrk(text: str) -> dict[str, float]:
    """requests/s and latency percentiles (ms) from `wrk --latency` output."""
    result: dict[str, float] = {"requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))}  # type: ignore[union-attr]  # wrk always prints Requests/sec
    for pct, value, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M):
        result[f"p{pct}_ms"] = round(float(value) * _UNITS[unit], 3)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    result["non_2xx"] = float(errors.group(1)) if errors else 0.0
    return result


def wrk(port: int, opts: argparse.Namespace, connections: int) -> dict[str, float]:
    threads = min(2, connections)
    out = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{opts.duration}s",
            "--latency",
            "-H",
            f"Host: {HOST}",
            f"http://127.0.0.1:{port}/index.html",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=opts.duration + 60,
    )
    return parse_wrk(out.stdout)


def interleaved(ports: dict[str, int], opts: argparse.Namespace, connections: int) -> dict[str, dict[str, float]]:
    """`wrk` on every path in turn, `--rounds` times (so that other load on the machine hits all paths alike):
    requests/s averaged over the rounds, latency percentiles the median of the rounds'."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ports}
    for _ in range(opts.rounds):
        for name, port in ports.items():
            runs[name].append(wrk(port, opts, connections))
    return {
        name: {
            key: round(
                statistics.median(r[key] for r in rounds)
                if key != "requests_per_s"
                else statistics.fmean(r[key] for r in rounds),
                3,
            )
            for key in rounds[0]
        }
        for name, rounds in runs.items()
    }


async def download(port: int, size: int) -> float:
    """Seconds to GET /blob (HTTP/1.0) from 127.0.0.1:port and read all `size` bytes of it."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /blob HTTP/1.0\r\nHost: bench\r\n\r\n")
    await writer.drain()
    received = 0
    while chunk := await reader.read(1 << 20):
        received += len(chunk)
    writer.close()
    if received < size:
        raise RuntimeError(f"downloaded {received} of {size} bytes")
    return time.perf_counter() - started


async def best_rate(port: int, size: int) -> float:
    times = [await download(port, size) for _ in range(3)]
    return round(size / min(times) / (1 << 20), 1)


async def port_forward_rates(address: str, host_port: int, opts: argparse.Namespace, logs: str) -> dict[str, Any]:
    size = opts.blob_mib << 20
    proc = spawn(["caractrl", "--server", address, "port-forward", "bench/web", ":8080"], f"{logs}/port-forward.log")
    try:
        assert proc.stdout is not None
        line = (await asyncio.to_thread(proc.stdout.readline)).decode()
        local = int(line.split()[2].rsplit(":", 1)[1])
        direct = await best_rate(host_port, size)
        forwarded = await best_rate(local, size)
    finally:
        proc.terminate()
        proc.wait(10)
    return {
        "blob_mib": opts.blob_mib,
        "direct_mib_per_s": direct,
        "port_forward_mib_per_s": forwarded,
        "ratio_port_forward_to_direct": round(forwarded / direct, 3),
    }


async def start_cluster(
    etcd: EtcdServer, logs: str, procs: list[subprocess.Popen[bytes]]
) -> tuple[str, dict[str, int]]:
    address = f"127.0.0.1:{free_port()}"
    procs.append(
        spawn(
            [
                "cara-apiserver",
                "--etcd-endpoints",
                etcd.endpoint,
                "--listen",
                address,
                "--metrics-listen",
                "off",
                "--log-level",
                "warning",
            ],
            f"{logs}/apiserver.log",
        )
    )
    ports = {node: free_port() for node in NODES}
    for node, port in ports.items():
        procs.append(
            spawn(
                [
                    "cara-agent",
                    "--server",
                    address,
                    "--node-name",
                    node,
                    "--listen",
                    "127.0.0.1:0",
                    "--health-listen",
                    "127.0.0.1:0",
                    "--ingress-listen",
                    f"127.0.0.1:{port}",
                    "--stop-timeout",
                    "1",
                    "--log-level",
                    "warning",
                ],
                f"{logs}/agent-{node}.log",
            )
        )
    return address, ports


async def run_project(client: Client, image: str, host_port: int, opts: argparse.Namespace) -> None:
    for node in NODES:

        async def ready(node: str = node) -> bool:
            return (await client.nodes.get(node)).status.state == v1.NODE_READY

        await wait_until(ready, f"node {node} registration")
    await client.projects.create(web_project(image, host_port, opts.blob_mib))
    current = meta.copy(await client.projects.get("bench"))
    current.status.node_ref = NODES[0]
    meta.set_phase(current, v1.SCHEDULED, reason="Scheduled", message="bound by the benchmark", now=time.time())
    await client.projects.update_status(current)

    async def running() -> bool:
        return (await client.projects.get("bench")).status.phase == v1.RUNNING

    await wait_until(running, "project bench Running")


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    if shutil.which("wrk") is None:
        raise SystemExit("bench_ingress: wrk is not installed (apt-get install wrk)")
    image = await asyncio.to_thread(ensure_test_image)
    logs = tempfile.mkdtemp(prefix="bench-ingress-")
    procs: list[subprocess.Popen[bytes]] = []
    host_port = free_port()
    try:
        async with EtcdServer() as etcd:
            address, ingress = await start_cluster(etcd, logs, procs)
            async with Client(address, retry_timeout=5) as client:
                await run_project(client, image, host_port, opts)
                await asyncio.sleep(1)  # the blob is written before httpd starts; let the first requests settle
                paths = {"direct": host_port, "local": ingress[NODES[0]], "hop": ingress[NODES[1]]}
                direct, local, hop = interleaved(paths, opts, opts.connections).values()
                one_direct, one_local, one_hop = interleaved(paths, opts, 1).values()
                forward = await port_forward_rates(address, host_port, opts, logs)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        for node in NODES:
            names = subprocess.run(
                ["docker", "ps", "-aq", "--filter", f"label=caravanserai.io/node={node}"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            if names:
                subprocess.run(["docker", "rm", "-f", *names], capture_output=True, check=False)
            nets = subprocess.run(
                ["docker", "network", "ls", "-q", "--filter", f"label=caravanserai.io/node={node}"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            if nets:
                subprocess.run(["docker", "network", "rm", *nets], capture_output=True, check=False)
        shutil.rmtree(logs, ignore_errors=True)
    ratio = round(local["requests_per_s"] / direct["requests_per_s"], 3)
    added_p50 = round(one_local["p50_ms"] - one_direct["p50_ms"], 3)
    return {
        "goals": [
            goal("ingress requests/s / published port's", ratio, 0.5, at_most=False),
            goal(
                "ingress added p50 latency (one connection: the hop, no queueing)",
                added_p50,
                1.0,
                at_most=True,
                unit=" ms",
            ),
        ],
        "benchmark": "ingress_and_port_forward_vs_direct",
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine skews every figure
        "wrk": {"duration_s": opts.duration, "rounds": opts.rounds, "connections": opts.connections, "threads": 2},
        "direct": direct,
        "ingress_local": local,
        "ingress_cross_node": hop,
        "ratio_ingress_to_direct_rps": ratio,
        "ingress_added_p50_ms": added_p50,
        "cross_node_hop_added_p50_ms": round(one_hop["p50_ms"] - one_local["p50_ms"], 3),
        "one_connection": {"direct": one_direct, "ingress_local": one_local, "ingress_cross_node": one_hop},
        "saturated_p50_difference_ms": {  # at saturation p50 is mostly queueing: connections / requests per second
            "ingress_local": round(local["p50_ms"] - direct["p50_ms"], 3),
            "ingress_cross_node": round(hop["p50_ms"] - direct["p50_ms"], 3),
        },
        "ratio_cross_node_to_local_rps": round(hop["requests_per_s"] / local["requests_per_s"], 3),
        "port_forward": forward,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=3, help="seconds of load per path and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three paths, interleaved")
    parser.add_argument("--connections", type=int, default=16, help="concurrent wrk connections")
    parser.add_argument("--blob-mib", type=int, default=64, help="size of the file downloaded through port-forward")
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
