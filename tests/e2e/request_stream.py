"""A constant request stream in a process of its own, counting every request that does not answer 200.

    python request_stream.py URL RATE HOST [HOST ...]

GETs URL at RATE requests per second (each request on its own, Host headers taken in turn) until its standard input
closes; then waits for the requests in flight and prints one JSON line: {"ok": N, "failures": ["503 no-backend",
...]}. A process of its own, so that the load of the client does not slow the agents and API server of the test.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import aiohttp


async def stream(url: str, rate: float, hosts: list[str]) -> dict[str, object]:
    ok, failures = 0, []

    async def one(session: aiohttp.ClientSession, host: str) -> None:
        nonlocal ok
        try:
            async with session.get(url, headers={"Host": host}) as response:
                await response.read()
                if response.status == 200:
                    ok += 1
                else:
                    failures.append(f"{host}: {response.status} {response.headers.get('X-Caravanserai-Error', '')}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            failures.append(f"{host}: {exc!r}")

    loop = asyncio.get_running_loop()
    closed = loop.run_in_executor(None, sys.stdin.read)  # the test closes our input to stop us
    tasks: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
        print("streaming", flush=True)
        start, sent = time.monotonic(), 0
        while not closed.done():
            await asyncio.sleep(max(0.0, start + sent / rate - time.monotonic()))
            task = asyncio.create_task(one(session, hosts[sent % len(hosts)]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
        await asyncio.gather(*tasks)
    return {"ok": ok, "failures": failures}


if __name__ == "__main__":
    url, rate, *hosts = sys.argv[1:]
    print(json.dumps(asyncio.run(stream(url, float(rate), hosts))), flush=True)
