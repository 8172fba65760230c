"""Writes/s and reads/s through the apiserver next to two limits measured in the same run, against the same
etcd. Prints JSON; the ratios are what we track.

    .venv/bin/python bench/bench_apiserver.py [--count 3000] [--clients 64] [--channels 4] [--workers 1,2] [--rounds 3]

The apiserver runs as its own process (`cara-apiserver`), as in production, so its CPU is not the benchmark's.
Its goal figures are taken with the relay's kind of client (bare grpc.aio stubs on bytes, requests serialized in
advance where they can be), so that on a machine whose cores the load generator shares, the comparison is of the
servers; the same operations through `caravanserai.client.Client` (as users and controllers call it) are
reported beside them (`through_client_library`).
"Clients" are concurrent request loops spread over `--channels` gRPC connections (each channel its own
connection, so that `--workers N` spreads them over its workers). The apiserver is measured once per `--workers`
value (1: one process, as by default; N: a supervisor and N worker processes on one address, CPU summed over
all); each configuration gets goal lines of its own. `--rounds` interleaved rounds measure every configuration
and limit in turn; each figure is its best round (every round is in `every_round`). The limits:

* **direct store**: the same serialized project with the same compare-and-swap transactions straight to etcd
  through `caravanserai.storage.Store`, from this process;
* **lean relay**: the Python limit of a gRPC front — a grpc.aio server process (this script with `--relay`) that
  serves the apiserver's own Create and Update methods and does only what no front can skip: decode the
  request, one compare-and-swap transaction through the Store, encode the reply; loaded with the very same raw
  calls by the same number of clients over the same number of channels. The goal (>= 0.85 of it) is what our
  layers (validation, defaults, admission, auth, watch cache, metrics) may cost.

Each operation's CPU per request (µs, the server's processes) is reported for create, update, get and a List of
`LIST_PAGE` projects.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import grpc
import structlog
from benchlib import free_port, goal, process_cpu, start_apiserver, stop, wait_serving
from prometheus_client.parser import text_string_to_metric_families

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.storage import EtcdClient, Store
from caravanserai.testing import EtcdServer
from caravanserai.testing.builders import project

LIST_PAGE = 100  # projects per List request measured
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]  # each channel its own connection, as each Client here

Op = Callable[[int], Awaitable[Any]]


async def rate(op: Op, count: int, *, workers: int) -> float:
    """Operations per second running `op(0..count-1)` over `workers` concurrent loops."""

    async def worker(first: int) -> None:
        for i in range(first, count, workers):
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return round(count / (time.perf_counter() - started), 1)


async def through_apiserver(
    address: str, count: int, clients: int, channels: int, *, first: int = 0
) -> dict[str, float]:
    """Creates, updates and gets of projects p<first>… through `caravanserai.client.Client`."""
    pool = [Client(address, own_connection=True) for _ in range(channels)]
    objs: dict[int, v1.Project] = {}
    try:

        def c(i: int) -> Client:
            return pool[i % channels]

        async def create(i: int) -> None:
            objs[i] = await c(i).projects.create(project(f"p{first + i:06d}", labels={"bench": "yes"}))

        async def update(i: int) -> None:
            obj = objs[i]
            obj.metadata.annotations["n"] = "1"
            objs[i] = await c(i).projects.update(obj)

        async def get(i: int) -> None:
            await c(i).projects.get(f"p{first + i:06d}")

        return {
            "create_per_s": await rate(create, count, workers=clients),
            "update_per_s": await rate(update, count, workers=clients),
            "get_per_s": await rate(get, count, workers=clients),
        }
    finally:
        for client in pool:
            await client.close()


RESOURCES = "/caravanserai.v1.Resources/"


async def through_apiserver_bare(
    address: str, count: int, clients: int, channels: int, *, cpu: Callable[[], float] | None = None, lists: bool = True
) -> dict[str, Any]:
    """The same requests as `through_apiserver`, made the way the relay's client makes its own: bare grpc.aio
    stubs on bytes, requests serialized before the clock starts where they can be (creates, gets, lists), so that
    the load generator's CPU is about the server's and the figure is the server's. Against the lean relay
    (`lists` False) only creates and updates, which is all it serves. `cpu()`: the server's CPU seconds so far,
    to report each operation's CPU per request in µs."""
    pool = [grpc.aio.insecure_channel(address, options=OWN_CONNECTION) for _ in range(channels)]
    stubs = {m: [ch.unary_unary(RESOURCES + m) for ch in pool] for m in ("Create", "Update", "Get", "List")}
    creates, gets = [], []
    for i in range(count):
        obj = project(f"p{i:06d}", labels={"bench": "yes"})
        obj.metadata.uid = str(uuid.uuid4())
        creates.append(v1.CreateRequest(resource="projects", object=v1.Object(project=obj)).SerializeToString())
        gets.append(v1.GetRequest(resource="projects", name=obj.metadata.name).SerializeToString())
    page = v1.ListRequest(resource="projects", limit=LIST_PAGE).SerializeToString()
    stored: dict[int, v1.Object] = {}
    result: dict[str, Any] = {}
    cpu_us: dict[str, float] = {}
    try:

        async def create(i: int) -> None:
            stored[i] = v1.Object.FromString(await stubs["Create"][i % channels](creates[i]))

        async def update(i: int) -> None:
            obj = stored[i]
            obj.project.metadata.annotations["n"] = "1"
            request = v1.UpdateRequest(resource="projects", object=obj).SerializeToString()
            stored[i] = v1.Object.FromString(await stubs["Update"][i % channels](request))

        async def get(i: int) -> None:
            await stubs["Get"][i % channels](gets[i])

        async def list_page(i: int) -> None:
            await stubs["List"][i % channels](page)

        ops: dict[str, tuple[Op, int]] = {"create": (create, count), "update": (update, count)}
        if lists:
            ops |= {"get": (get, count), "list": (list_page, max(count // 10, 1))}
        for name, (op, n) in ops.items():
            before = cpu() if cpu else 0.0
            result[f"{name}_per_s"] = await rate(op, n, workers=clients)
            if cpu:
                cpu_us[name] = round((cpu() - before) / n * 1e6)
        if cpu:
            result["cpu_us_per_request"] = cpu_us
        return result
    finally:
        for ch in pool:
            await ch.close()


async def direct(endpoint: str, count: int, clients: int, prefix: str) -> dict[str, float]:
    value = project("p000000", labels={"bench": "yes"}).SerializeToString()
    revisions: dict[int, int] = {}
    async with EtcdClient([endpoint]) as etcd:
        store = Store(etcd, prefix=prefix)

        async def create(i: int) -> None:
            revisions[i] = await store.create("projects", f"p{i:06d}", value)

        async def update(i: int) -> None:
            revisions[i] = await store.update("projects", f"p{i:06d}", value, expected_revision=revisions[i])

        async def get(i: int) -> None:
            await store.get("projects", f"p{i:06d}")

        return {
            "create_per_s": await rate(create, count, workers=clients),
            "update_per_s": await rate(update, count, workers=clients),
            "get_per_s": await rate(get, count, workers=clients),
        }


# ---- the lean relay ---------------------------------------------------------------------------------------------


async def serve_relay(endpoint: str, address: str, prefix: str) -> None:
    """A grpc.aio server of the apiserver's own Create and Update methods doing only what no apiserver can skip:
    decode the request, one compare-and-swap transaction through the Store (the object as it came, its resource
    version set from the etcd revision), encode the reply. No validation, defaults, watch cache, auth or
    metrics. Runs until terminated."""
    async with EtcdClient([endpoint]) as etcd:
        store = Store(etcd, prefix=prefix)

        async def create(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            decoded = v1.CreateRequest.FromString(request)
            obj = decoded.object.project
            revision = await store.create(decoded.resource, obj.metadata.name, obj.SerializeToString())
            obj.metadata.resource_version = str(revision)
            return decoded.object.SerializeToString()

        async def update(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            decoded = v1.UpdateRequest.FromString(request)
            obj = decoded.object.project
            expected = int(obj.metadata.resource_version)
            revision = await store.update(
                decoded.resource, obj.metadata.name, obj.SerializeToString(), expected_revision=expected
            )
            obj.metadata.resource_version = str(revision)
            return decoded.object.SerializeToString()

        server = grpc.aio.server()
        handlers: dict[str, grpc.RpcMethodHandler[bytes, bytes]] = {
            "Create": grpc.unary_unary_rpc_method_handler(create),
            "Update": grpc.unary_unary_rpc_method_handler(update),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("caravanserai.v1.Resources", handlers)])
        server.add_insecure_port(address)
        await server.start()
        print("serving", flush=True)
        await server.wait_for_termination()


async def relay(endpoint: str, count: int, clients: int, channels: int, prefix: str) -> dict[str, Any]:
    """The relay process started, measured (its CPU share too), stopped."""
    address = f"127.0.0.1:{free_port()}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--relay",
        "--etcd",
        endpoint,
        "--address",
        address,
        "--prefix",
        prefix,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        if (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() != b"serving":
            raise RuntimeError("the relay did not start")
        cpu, started = process_cpu(proc.pid), time.perf_counter()
        result = await through_apiserver_bare(
            address, count, clients, channels, cpu=lambda: process_cpu(proc.pid), lists=False
        )
        result["relay_cpu_share"] = round((process_cpu(proc.pid) - cpu) / (time.perf_counter() - started), 2)
        return result
    finally:
        proc.terminate()
        await proc.wait()


async def _all_ready(metrics: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            async with session.get(f"http://{metrics}/readyz") as response:
                if response.status == 200:
                    return
            await asyncio.sleep(0.1)
    raise TimeoutError("the apiserver's workers did not get ready")


async def _requests_by_worker(metrics: str) -> dict[str, float]:
    """Requests each worker answered (how the kernel spread the connections); one process: key "all"."""
    async with aiohttp.ClientSession() as session, session.get(f"http://{metrics}/metrics") as response:
        text = await response.text()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "caravanserai_apiserver_requests_total":
                worker = sample.labels.get("worker", "all")
                counts[worker] = counts.get(worker, 0) + sample.value
    return dict(sorted(counts.items()))


def _tree_cpu(pid: int) -> float:
    """CPU seconds of process `pid` and its live children (a `--workers N` supervisor and its workers)."""
    total = process_cpu(pid)
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == pid:
                total += process_cpu(int(name))
    return total


async def apiserver(endpoint: str, opts: argparse.Namespace, workers: int, prefix: str) -> dict[str, Any]:
    """`cara-apiserver --workers N` started, measured (with its CPU, all workers), stopped."""
    address, metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    proc = start_apiserver(endpoint, address, prefix, "--workers", str(workers),
                           "--metrics-listen", metrics)  # fmt: skip
    try:
        await wait_serving(address, proc)
        await _all_ready(metrics)  # wait_serving reached one worker; /readyz answers for all
        server_cpu, client_cpu = _tree_cpu(proc.pid), time.process_time()
        started = time.perf_counter()
        result = await through_apiserver_bare(
            address, opts.count, opts.clients, opts.channels, cpu=lambda: _tree_cpu(proc.pid)
        )
        elapsed = time.perf_counter() - started
        result["cpu"] = {
            "apiserver_cpu_share": round((_tree_cpu(proc.pid) - server_cpu) / elapsed, 2),
            "bench_client_cpu_share": round((time.process_time() - client_cpu) / elapsed, 2),
        }
        # The same again (fresh names) through caravanserai.client.Client, as users and controllers call it.
        result["through_client_library"] = await through_apiserver(address, opts.count, opts.clients, opts.channels,
                                                                   first=opts.count)  # fmt: skip
        result["requests_by_worker"] = await _requests_by_worker(metrics)
        return result
    finally:
        stop(proc)


def _goals(clients: int, runs: dict[int, dict[str, Any]], bare: dict[str, float]) -> list[Any]:
    """A goal line per write and configuration measured (1 worker, then each `--workers N`) against the lean
    relay (the old goal against the direct store is retired: its figure stays in the JSON)."""
    lines = []
    for workers, api in sorted(runs.items()):
        label = "1 process" if workers == 1 else f"--workers {workers}"
        for op in ("create", "update"):
            key = f"{op}_per_s"
            lines.append(goal(f"apiserver ({label}): {op} writes/s / lean relay at {clients} clients",
                              round(api[key] / bare[key], 3), 0.85, at_most=False))  # fmt: skip
    return lines


def best(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure (a rate: higher is better) at its best round; the other entries of the best create round."""
    top = max(rounds, key=lambda r: r["create_per_s"])
    return {**top, **{k: max(r[k] for r in rounds) for k in top if k.endswith("_per_s")}}


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    counts = sorted({int(n) for n in opts.workers.split(",")})
    measured: dict[str, list[dict[str, Any]]] = {}
    async with EtcdServer() as etcd:
        for n in range(opts.rounds):  # interleaved, so that a busy moment of the machine hits every figure alike
            measured.setdefault("direct", []).append(await direct(etcd.endpoint, opts.count, opts.clients, f"/d{n}"))
            measured.setdefault("relay", []).append(
                await relay(etcd.endpoint, opts.count, opts.clients, opts.channels, f"/r{n}")
            )
            for w in counts:
                measured.setdefault(f"workers={w}", []).append(await apiserver(etcd.endpoint, opts, w, f"/a{w}-{n}"))
    base, bare = best(measured["direct"]), best(measured["relay"])
    runs = {w: best(measured[f"workers={w}"]) for w in counts}
    one = runs[counts[0]]
    return {
        "benchmark": "apiserver_vs_direct_store",
        "count": opts.count,
        "concurrent_clients": opts.clients,
        "grpc_channels": opts.channels,
        "rounds": opts.rounds,
        "cpus": os.cpu_count(),
        "apiserver": {k: one[k] for k in ("create_per_s", "update_per_s", "get_per_s")},
        "apiserver_by_workers": runs,
        "direct_store": base,
        "lean_relay": bare,
        "ratio_apiserver_to_direct": {
            n: {k: round(api[k] / base[k], 3) for k in ("create_per_s", "update_per_s", "get_per_s")}
            for n, api in runs.items()
        },
        "ratio_apiserver_to_lean_relay": {
            n: {k: round(api[k] / bare[k], 3) for k in ("create_per_s", "update_per_s")} for n, api in runs.items()
        },
        "goals": _goals(opts.clients, runs, bare),
        "every_round": measured,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--workers", default="1,2", help="apiserver configurations to measure: --workers values")
    parser.add_argument("--relay", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--etcd", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each figure is its best round")
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    args = parser.parse_args()
    if args.relay:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_relay(args.etcd, args.address, args.prefix))
    else:
        print(json.dumps(asyncio.run(main(args)), indent=2))
