"""restic volume backups against `tar` on the same bytes and the same disk, in the same run. Prints JSON.

    .venv/bin/python bench/bench_backup.py [--size-mib 1024] [--rounds 2] [--change-percent 1] [--dir DIR]

A volume directory of `--size-mib` (1 GiB) is made of random bytes (incompressible, like media, archives or
encrypted files: restic's compression and deduplication gain nothing, the worst case for it) in a realistic mix of
sizes: many small files in nested directories (1–64 KiB, about an eighth of the bytes), medium ones (256 KiB–4 MiB,
about two fifths) and large ones (64 MiB, the rest; the last one takes what is left). Everything lives in one
temporary directory (`--dir`, default the system's), removed at the end. The REST repository is a real
`rclone serve restic` on loopback (`caravanserai.testing.RestServer`) whose repositories are in that directory too,
so restic and tar write to the same disk. restic keeps its cache there as an agent would (`RESTIC_CACHE_DIR`).

Measured, each timed until the data is on disk (`sync` after the command; dirty pages are flushed before it
starts); reads come from the page cache for both tools alike (the volume was just written):

(a) a full backup (`restic backup .` in the volume, as the agent runs it) against `tar -c` of the volume to a
    file (GNU tar's level-0 `--listed-incremental`, which writes the plain archive and the file list (c) needs);
(b) a restore (`restic restore ID --target`) against `tar -x` of that archive, both into empty directories;
    the restore is checked byte for byte (SHA-256 of every file) after the timing;
(c) `--change-percent` (1 %) of the bytes is changed, as a service would: whole small and medium files rewritten
    (half the changed bytes) and one region overwritten in the middle of a large file (the other half, like a
    database's pages); then an incremental backup against GNU tar's level-1 `--listed-incremental` of the same
    change. That floor walks the same tree and copies every changed file whole, as any file-level incremental
    copy must (restic also reads every changed file whole, but stores only new chunks); the full tar is the
    second floor: what a backup would cost without incremental backups at all.

Each of `--rounds` rounds runs (a), (b) and (c) on a new, empty repository (removed after the round; the volume
keeps the previous rounds' changes); the best time of each tool and step counts, as other work on the machine
only ever adds time. Also timed: `restic cat config`, the part of every restic run that does not depend on the
data (start, open the repository with its scrypt-derived key, read the index).

Goals (one JSON line each in `make bench`, with seconds, MB/s (10^6 bytes/s), CPU seconds and the ratio): restic's
full backup and restore within 4× tar's time; the incremental within 4× tar's incremental and within a quarter of
a full tar. Each line also gives the CPU seconds of restic, of the REST server and of tar: restic's cost is CPU
(SHA-256 of every chunk, content-defined chunking, AES, a compression attempt), so on few cores its ratio to tar
is mostly cores.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import pathlib
import random
import resource
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from benchlib import goal, process_cpu

from caravanserai.testing.restic import ResticRepository, RestServer

MIB = 1 << 20
KIB = 1 << 10
SMALL = (1 * KIB, 64 * KIB, 1 / 8)  # (smallest, largest, share of the bytes)
MEDIUM = (256 * KIB, 4 * MIB, 2 / 5)
LARGE = 64 * MIB
WRITE_BLOCK = 4 * MIB


def plan_sizes(total: int, rng: random.Random) -> list[int]:
    """File sizes adding up to exactly `total`: small, medium, then large files (the last large one is smaller)."""
    sizes: list[int] = []
    for low, high, share in (SMALL, MEDIUM):
        budget = int(total * share)
        while budget > low:
            size = min(rng.randint(low, high), budget)
            sizes.append(size)
            budget -= size
    left = total - sum(sizes)
    while left > 0:
        sizes.append(min(LARGE, left))
        left -= sizes[-1]
    return sizes


def file_name(index: int, size: int) -> str:
    """Small files spread over nested directories (a tree like a wiki's or a mail store's); the others flat."""
    if size <= SMALL[1]:
        return f"small/{index % 16:02x}/{index // 16 % 8:02x}/f{index:05d}.dat"
    return f"{'medium' if size <= MEDIUM[1] else 'large'}/f{index:05d}.dat"


def write_random(path: pathlib.Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        for offset in range(0, size, WRITE_BLOCK):
            out.write(os.urandom(min(WRITE_BLOCK, size - offset)))


def make_volume(root: pathlib.Path, total: int, seed: int) -> dict[str, int]:
    """Write the volume; {relative path: size}."""
    sizes = plan_sizes(total, random.Random(seed))
    files = {file_name(i, size): size for i, size in enumerate(sizes)}
    for name, size in files.items():
        write_random(root / name, size)
    return files


def change_volume(
    root: pathlib.Path, files: dict[str, int], fraction: float, seed: int
) -> tuple[dict[str, int], list[str]]:
    """Change `fraction` of the volume's bytes: half by rewriting whole small/medium files (new random content, same
    size), half by overwriting a region in the middle of the largest file. What was changed (bytes, files), and the
    names of the changed files."""
    rng = random.Random(seed)
    target = round(sum(files.values()) * fraction)
    candidates = [name for name, size in files.items() if size <= MEDIUM[1]]
    rng.shuffle(candidates)
    rewritten: list[str] = []
    budget = target // 2
    for name in candidates:
        if files[name] <= budget:
            write_random(root / name, files[name])
            rewritten.append(name)
            budget -= files[name]
    region = target - sum(files[name] for name in rewritten)
    large = max(files, key=lambda name: files[name])
    fd = os.open(root / large, os.O_WRONLY)
    try:
        os.pwrite(fd, os.urandom(region), (files[large] - region) // 2)
    finally:
        os.close(fd)
    report = {
        "changed_bytes": target,
        "rewritten_files": len(rewritten),
        "rewritten_bytes": target - region,
        "overwritten_region_bytes": region,
        "size_of_the_large_file_holding_the_region": files[large],
    }
    return report, [*rewritten, large]


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def timed(operation: Callable[[], Awaitable[Any]], server_pid: int) -> tuple[dict[str, float], Any]:
    """Run `operation()` and sync its writes to disk (dirty pages are flushed before the clock starts): wall
    seconds, CPU seconds of the command it ran, CPU seconds of the REST server meanwhile; and its result."""
    os.sync()
    wall, cpu, server = time.perf_counter(), children_cpu(), process_cpu(server_pid)
    result = await operation()
    os.sync()
    return {
        "s": time.perf_counter() - wall,
        "cpu_s": round(children_cpu() - cpu, 2),
        "rest_server_cpu_s": round(process_cpu(server_pid) - server, 2),
    }, result


async def run(*command: str) -> None:
    """Run a command (tar) to its end; its output discarded; a failure raises."""
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.DEVNULL)
    if await proc.wait() != 0:
        raise RuntimeError(f"{command[0]} failed with exit {proc.returncode}")


def digests(root: pathlib.Path, names: list[str] | None = None) -> dict[str, str]:
    """SHA-256 of every file below `root` (or of `names` only), by relative path."""
    if names is None:
        names = [str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()]
    found = {}
    for name in names:
        with open(root / name, "rb") as f:
            found[name] = hashlib.file_digest(f, "sha256").hexdigest()
    return found


def version(command: list[str]) -> str:
    out = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    return (out.splitlines() or ["unknown"])[0]


HOST = "bench-node"
TAGS = ("caravanserai", "project=bench", "volume=data", f"node={HOST}", f"epoch={HOST}/00000000")


class Bench:
    """The places and tools of a run: the work directory, the volume and the SHA-256 of its files (kept up to date
    as the rounds change it), the REST server, and the repository of the current round."""

    def __init__(self, work: pathlib.Path, server: RestServer, repository: ResticRepository) -> None:
        self.work, self.volume, self.server, self.repository = work, work / "volume", server, repository
        self.expected = digests(self.volume)

    def tar_create(self, archive: str, file_list: str) -> Callable[[], Awaitable[None]]:
        """GNU tar of the whole volume, recording (level 0) or comparing against (level 1) `file_list`."""
        listed = f"--listed-incremental={self.work / file_list}"
        return lambda: run("tar", listed, "-cf", str(self.work / archive), "-C", str(self.volume), ".")

    async def timed(self, operation: Callable[[], Awaitable[Any]]) -> tuple[dict[str, float], Any]:
        assert self.server.pid is not None
        return await timed(operation, self.server.pid)

    async def backup(self) -> tuple[dict[str, float], dict[str, Any]]:
        return await self.timed(lambda: self.repository.backup(self.volume, *TAGS, host=HOST))

    async def full(self) -> dict[str, Any]:
        """(a): tar's level 0 (a new file list), then restic's first backup into the round's empty repository."""
        (self.work / "level0.snar").unlink(missing_ok=True)
        tar, _ = await self.timed(self.tar_create("full.tar", "level0.snar"))
        restic, summary = await self.backup()
        return {"tar": tar, "restic": restic, "summary": summary}

    async def restore(self, snapshot: str) -> dict[str, Any]:
        """(b): tar -x of the full archive, then restic restore of the snapshot; the restore checked byte for byte."""
        extracted, restored = self.work / "extracted", self.work / "restored"
        extracted.mkdir()
        archive = str(self.work / "full.tar")
        tar, _ = await self.timed(
            lambda: run("tar", "--listed-incremental=/dev/null", "-xf", archive, "-C", str(extracted))
        )
        shutil.rmtree(extracted)
        restic, _ = await self.timed(lambda: self.repository.restore(snapshot, restored))
        if digests(restored) != self.expected:
            raise RuntimeError("the restored volume differs from the backed-up one")
        shutil.rmtree(restored)
        return {"tar": tar, "restic": restic}

    async def incremental(self, files: dict[str, int], fraction: float, seed: int) -> dict[str, Any]:
        """(c): change `fraction` of the bytes, then tar's level 1 against level 0's list, then restic's backup."""
        change, changed = change_volume(self.volume, files, fraction, seed)
        self.expected.update(digests(self.volume, changed))
        shutil.copy(self.work / "level0.snar", self.work / "level1.snar")
        tar, _ = await self.timed(self.tar_create("incremental.tar", "level1.snar"))
        restic, summary = await self.backup()
        tar_bytes = (self.work / "incremental.tar").stat().st_size
        return {"tar": tar, "restic": restic, "summary": summary, "change": change, "tar_archive_bytes": tar_bytes}

    async def round(
        self, repository: ResticRepository, files: dict[str, int], fraction: float, seed: int
    ) -> dict[str, Any]:
        """(a), (b) and (c) once, on the volume as it is now, with `repository` (new and empty)."""
        self.repository = repository
        full = await self.full()
        back = await self.restore(full["summary"]["snapshot_id"])
        # the part of every restic run that is not about the data: start, open the repository (its key is derived
        # from the password with scrypt, on purpose slow) and read it; `restic cat config` does only that
        opening, _ = await self.timed(lambda: self.repository.run("cat", "config"))
        inc = await self.incremental(files, fraction, seed)
        return {"full": full, "restore": back, "incremental": inc, "open": {"restic": opening}}


def describe_volume(files: dict[str, int]) -> dict[str, Any]:
    classes: dict[str, dict[str, int]] = {}
    for name, size in files.items():
        entry = classes.setdefault(name.split("/", 1)[0], {"files": 0, "bytes": 0})
        entry["files"] += 1
        entry["bytes"] += size
    return {
        "content": "random bytes (os.urandom): incompressible, no duplicates",
        "files": len(files),
        "bytes": sum(files.values()),
        "by_class": classes,
        "classes": "small: 1-64 KiB in nested directories; medium: 256 KiB-4 MiB; large: 64 MiB",
    }


async def measure(work: pathlib.Path, opts: argparse.Namespace) -> dict[str, Any]:
    """Make the volume, serve the repositories, run `--rounds` rounds, each on a new repository (removed after)."""
    files = make_volume(work / "volume", opts.size_mib * MIB, seed=1)
    rounds = []
    cache = {"RESTIC_CACHE_DIR": str(work / "cache")}  # restic keeps its cache as an agent's would
    async with RestServer(work / "rest") as server:
        bench: Bench | None = None
        for n in range(opts.rounds):
            name = f"round{n}"
            password = secrets.token_hex(16)
            repository = ResticRepository(server.repository_url(name), password, no_cache=False, env=cache)
            await repository.init()
            bench = bench or Bench(work, server, repository)
            result = await bench.round(repository, files, opts.change_percent / 100, seed=100 + n)
            result["repository_bytes"] = sum(p.stat().st_size for p in (server.root / name).rglob("*") if p.is_file())
            rounds.append(result)
            shutil.rmtree(server.root / name)
    best = {part: {tool: min((r[part][tool] for r in rounds), key=lambda t: t["s"]) for tool in ("tar", "restic")}
            for part in ("full", "restore", "incremental")}  # fmt: skip
    best["open"] = {"restic": min((r["open"]["restic"] for r in rounds), key=lambda t: t["s"])}
    last = rounds[-1]["incremental"]
    best["incremental"].update(change=last["change"], tar_archive_bytes=last["tar_archive_bytes"])
    best["incremental"]["data_added"] = last["summary"]["data_added"]
    return {"volume": describe_volume(files), "best": best, "rounds": rounds}


def line(name: str, part: dict[str, Any], nbytes: int, target: float) -> dict[str, Any]:
    """A goal line: restic's seconds over tar's, with both tools' seconds, MB/s (10^6 bytes) and CPU seconds."""
    restic, tar = part["restic"], part["tar"]
    ratio = round(restic["s"] / tar["s"], 2)
    part["ratio_restic_to_tar"] = ratio
    return {
        **goal(name, ratio, target, at_most=True),
        "restic_s": round(restic["s"], 3),
        "restic_mb_per_s": round(nbytes / restic["s"] / 1e6, 1),
        "tar_s": round(tar["s"], 3),
        "tar_mb_per_s": round(nbytes / tar["s"] / 1e6, 1),
        "bytes": nbytes,
        "restic_cpu_s": restic["cpu_s"],
        "rest_server_cpu_s": restic["rest_server_cpu_s"],
        "tar_cpu_s": tar["cpu_s"],
    }


def goals(best: dict[str, Any], opts: argparse.Namespace) -> list[dict[str, Any]]:
    full, back, inc = best["full"], best["restore"], best["incremental"]
    size, changed, pct = opts.size_mib * MIB, inc["change"]["changed_bytes"], f"{opts.change_percent:g} %"
    label = f"{opts.size_mib} MiB volume"
    versus_full = round(inc["restic"]["s"] / full["tar"]["s"], 3)
    return [
        line(f"backup: full backup of a {label} through REST / tar -c to the same disk", full, size, 4),
        line(f"backup: restore of a {label} from REST / tar -x from the same disk", back, size, 4),
        {**line(f"backup: incremental after {pct} changed / tar --listed-incremental of it", inc, changed, 4),
         "restic_data_added": inc["data_added"], "tar_archive_bytes": inc["tar_archive_bytes"],
         "restic_open_repository_s": round(best["open"]["restic"]["s"], 3)},
        {**goal(f"backup: incremental after {pct} changed / full tar -c", versus_full, 0.25, at_most=True),
         "restic_s": round(inc["restic"]["s"], 3), "full_tar_s": round(full["tar"]["s"], 3),
         "restic_incremental_to_full": round(inc["restic"]["s"] / full["restic"]["s"], 3)},
    ]  # fmt: skip


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-backup-", dir=opts.dir))
    try:
        run = await measure(work, opts)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "restic_backup_vs_tar",
        "goals": goals(run["best"], opts),
        "rounds_run": opts.rounds,
        "restic": version(["restic", "version"]),
        "rclone": version(["rclone", "version"]),
        "cpus": os.cpu_count(),
        "load_average_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "timing": "each command plus sync (writes durable); reads from the page cache for both tools",
        "floors": {
            "full": "tar -c of the volume to a file on the same disk (GNU tar, level-0 --listed-incremental)",
            "restore": "tar -x of that archive into an empty directory",
            "incremental": "GNU tar level-1 --listed-incremental: the same tree walk, every changed file whole",
        },
        **run,
        "benchmark_s": round(time.perf_counter() - started, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the volume")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of (a), (b), (c); the best time of each counts")
    parser.add_argument("--change-percent", type=float, default=1.0, help="share of the bytes changed before (c)")
    parser.add_argument("--dir", default=None, help="where the temporary directory goes (default: the system's)")
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
