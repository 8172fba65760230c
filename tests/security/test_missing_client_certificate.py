"""A client without a certificate, against an apiserver that requires one, is told so (not gRPC's "Socket
closed"), by the client library and by caractrl in one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable

import pytest

from caravanserai.client import Client
from caravanserai.errors import Unavailable
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer

WANTED = "the server wants a client certificate"


async def test_client_without_a_certificate_is_told_the_server_wants_one(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    anonymous = TLSFiles(ca=tls_of("admin").ca)
    async with Client(secure_api.address, tls=anonymous, timeout=5, retry_timeout=3) as client:
        with pytest.raises(Unavailable) as info:
            await client.projects.list()
    assert WANTED in str(info.value)
    assert "Socket closed" not in str(info.value)


async def test_caractrl_without_a_certificate_says_so_in_one_line(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    argv = [sys.executable, "-m", "caravanserai.cli", "--server", secure_api.address]
    argv += ["--tls-ca", tls_of("admin").ca, "get", "projects"]
    result = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=90, check=False)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and WANTED in result.stderr, result.stderr
