"""caravanserai.testing.restic: a real `rclone serve restic` on loopback only, real restic repositories (REST and
local path) that take backups and give them back, and nothing left running or on disk afterwards."""

from __future__ import annotations

import os
import pathlib
import socket
import sys

import pytest

from caravanserai.testing.restic import (
    ResticError,
    ResticRepository,
    RestServer,
    RestServerStartError,
    local_repository_url,
)

PASSWORD = "correct horse battery staple"


def _listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket process `pid` listens on, read from /proc."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in pathlib.Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                raw = bytes.fromhex(address)
                # /proc prints the address as native-endian 32-bit words
                packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.append((socket.inet_ntop(family, packed), int(port, 16)))
    return found


def _write_files(directory: pathlib.Path) -> dict[str, bytes]:
    files = {"a.txt": b"counter=675\n", "nested/b.bin": os.urandom(300_000), "empty": b""}
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return files


def _read_files(directory: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_the_rest_server_listens_on_loopback_only() -> None:
    async with RestServer() as server:
        assert server.pid is not None
        assert _listening_addresses(server.pid) == [("127.0.0.1", server.port)]
        assert server.url == f"rest:http://127.0.0.1:{server.port}/repo/"


async def test_a_rest_repository_is_initialised_backed_up_to_and_restored_from(tmp_path: pathlib.Path) -> None:
    data, target = tmp_path / "data", tmp_path / "restored"
    data.mkdir()
    files = _write_files(data)
    async with RestServer(name="volumes") as server:
        repository = ResticRepository(server.url, PASSWORD)
        await repository.init()
        assert (server.root / "volumes" / "config").is_file()
        summary = await repository.backup(data, "project=uid-1", "volume=data", host="node-a")
        [snapshot] = await repository.snapshots("project=uid-1", "volume=data")
        assert snapshot["short_id"] == summary["snapshot_id"][:8]
        assert (snapshot["hostname"], sorted(snapshot["tags"])) == ("node-a", ["project=uid-1", "volume=data"])
        assert summary["total_bytes_processed"] == sum(len(content) for content in files.values())
        await repository.restore(summary["snapshot_id"], target)
    assert _read_files(target) == files  # the snapshot's root is the volume's directory


async def test_a_local_path_repository_is_backed_up_to_and_restored_from(tmp_path: pathlib.Path) -> None:
    data, target = tmp_path / "data", tmp_path / "restored"
    data.mkdir()
    files = _write_files(data)
    url = local_repository_url(tmp_path / "repo")
    assert url == str((tmp_path / "repo").resolve())
    repository = ResticRepository(url, PASSWORD)
    await repository.init()
    await repository.backup(data, "volume=data")
    (data / "a.txt").write_bytes(b"counter=676\n")
    await repository.backup(data, "volume=data")
    first, second = await repository.snapshots("volume=data")
    await repository.restore(first["id"], target)
    assert _read_files(target) == files
    assert second["time"] > first["time"]


async def test_the_server_and_its_files_are_gone_after_the_context_even_when_the_test_fails() -> None:
    server = RestServer()
    with pytest.raises(RuntimeError, match="the test failed"):
        async with server:
            pid, root = server.pid, server.root
            assert pid is not None and root.is_dir()
            raise RuntimeError("the test failed")
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped: no zombie either
    assert not root.exists()


async def test_a_callers_root_is_kept_and_served_again(tmp_path: pathlib.Path) -> None:
    async with RestServer(tmp_path) as server:
        await ResticRepository(server.url, PASSWORD).init()
    async with RestServer(tmp_path) as again:  # another port, the same repositories
        assert await ResticRepository(again.url, PASSWORD).snapshots() == []


async def test_restic_errors_are_restics_reason_without_the_password(cara_rest_server: RestServer) -> None:
    repository = ResticRepository(cara_rest_server.url, PASSWORD)
    with pytest.raises(ResticError, match="does not exist") as not_initialised:
        await repository.snapshots()
    await repository.init()
    wrong = ResticRepository(cara_rest_server.url, "not the password")
    with pytest.raises(ResticError, match="wrong password") as wrong_password:
        await wrong.snapshots()
    for error in (not_initialised, wrong_password):
        assert PASSWORD not in str(error.value) and "not the password" not in str(error.value)
        assert cara_rest_server.url in str(error.value)


async def test_the_plugin_gives_an_initialised_repository(cara_restic_repository: ResticRepository) -> None:
    assert cara_restic_repository.url.startswith("rest:http://127.0.0.1:")
    assert await cara_restic_repository.snapshots() == []


async def test_a_missing_rclone_is_a_clear_start_error() -> None:
    server = RestServer(binary="no-such-rclone")
    with pytest.raises(RestServerStartError, match="Debian package rclone"):
        await server.start()
    assert not server.running


async def test_a_server_that_exits_at_once_is_a_start_error() -> None:
    server = RestServer(binary="false")  # exits 1 without answering
    with pytest.raises(RestServerStartError, match=r"exited during start-up \(code 1\)"):
        await server.start()
    assert not server.running and server.pid is None


def test_a_repository_name_is_one_path_segment() -> None:
    server = RestServer()
    with pytest.raises(ValueError, match="one non-empty path segment"):
        server.repository_url("a/b")
