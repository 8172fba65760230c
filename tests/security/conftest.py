"""Security fixtures: a CA and certificates made with deploy/certs.sh, and an apiserver requiring mutual TLS."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.etcd import EtcdServer
from support.certfiles import tls_for

ROOT = Path(__file__).resolve().parents[2]
IDENTITIES = ["apiserver", "admin", "controller:manager", "controller:autoscaler", "node:n1", "node:n2", "viewer"]
TOKENS = "admin-token,admin-by-token,admin\nview-token,alice\n"


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    subprocess.run([str(ROOT / "deploy" / "certs.sh"), str(out), *IDENTITIES], check=True, capture_output=True)
    (out / "tokens.csv").write_text(TOKENS)
    return out


@pytest.fixture(scope="session")
def tls_of(certs: Path) -> Callable[[str], TLSFiles]:
    """TLS files (cert, key, CA) of an identity made by the `certs` fixture."""
    return lambda identity: tls_for(certs, identity)


@pytest.fixture
async def secure_api(etcd: EtcdServer, certs: Path) -> AsyncIterator[RunningApiServer]:
    server_tls = tls_for(certs, "apiserver")
    async with apiserver(etcd.endpoint, tls=server_tls, token_file=str(certs / "tokens.csv")) as running:
        yield running
