"""Only the apiservers reach etcd: `deploy/certs.sh` makes a separate etcd CA, and etcd (client-cert auth, trusting
only that CA) refuses every certificate of the fleet CA (a node's, the admin's) while the apiserver's
`apiserver-etcd-client` certificate reads and writes. The deploy units and both documents use that layout."""

from __future__ import annotations

import re
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from caravanserai.errors import CaravanseraiError
from caravanserai.process.tls import TLSFiles
from caravanserai.storage.etcd import EtcdClient
from caravanserai.testing.etcd import EtcdServer, endpoint_healthy

ROOT = Path(__file__).resolve().parents[2]
IDENTITIES = ["apiserver", "etcd", "apiserver-etcd-client", "admin", "node:n1"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pki")
    subprocess.run([str(ROOT / "deploy" / "certs.sh"), str(out), *IDENTITIES], check=True, capture_output=True)
    return out


def files(pki: Path, identity: str, *, ca: str = "etcd-ca.crt") -> TLSFiles:
    """`identity`'s pair; `ca` verifies etcd's server certificate (any client may know the etcd CA's certificate)."""
    name = identity.replace(":", "-")
    return TLSFiles(cert=str(pki / f"{name}.crt"), key=str(pki / f"{name}.key"), ca=str(pki / ca))


@pytest.fixture
async def etcd_only_for_apiservers(pki: Path) -> AsyncIterator[EtcdServer]:
    async with EtcdServer(tls=files(pki, "etcd")) as server:
        yield server


def context(tls: TLSFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=tls.ca)
    ctx.load_cert_chain(tls.cert, tls.key)
    return ctx


async def healthy_as(server: EtcdServer, tls: TLSFiles) -> bool:
    url = urlparse(server.endpoint)
    assert url.hostname is not None and url.port is not None
    return await endpoint_healthy(url.hostname, url.port, context(tls))


async def test_etcd_refuses_fleet_certificates_and_accepts_the_apiserver_etcd_client(
    pki: Path, etcd_only_for_apiservers: EtcdServer
) -> None:
    server = etcd_only_for_apiservers
    apiserver_client = files(pki, "apiserver-etcd-client")
    assert await healthy_as(server, apiserver_client)
    async with EtcdClient([server.endpoint], tls=apiserver_client, dial_timeout=10) as client:
        await client.put(b"/caravanserai/secrets/s1", b"value")
        assert (await client.range(b"/caravanserai/secrets/s1")).kvs[0].value == b"value"

    for identity in ("node:n1", "admin", "apiserver"):  # every certificate of the fleet CA
        assert not await healthy_as(server, files(pki, identity)), identity
        with pytest.raises((CaravanseraiError, TimeoutError)):
            async with EtcdClient([server.endpoint], tls=files(pki, identity), dial_timeout=3) as intruder:
                await intruder.range(b"/caravanserai/secrets/s1")


def test_etcd_ca_is_separate_from_the_fleet_ca(pki: Path) -> None:
    def verify(cert: str, ca: str) -> bool:
        argv = ["openssl", "verify", "-CAfile", str(pki / ca), str(pki / cert)]
        return subprocess.run(argv, capture_output=True, check=False).returncode == 0

    assert verify("etcd.crt", "etcd-ca.crt") and verify("apiserver-etcd-client.crt", "etcd-ca.crt")
    assert not verify("node-n1.crt", "etcd-ca.crt") and not verify("apiserver.crt", "etcd-ca.crt")
    assert verify("node-n1.crt", "ca.crt") and not verify("apiserver-etcd-client.crt", "ca.crt")
    assert all((p.stat().st_mode & 0o077) == 0 for p in pki.glob("*.key"))


def test_units_and_documents_agree_on_the_etcd_ca() -> None:
    etcd_unit = (ROOT / "deploy/systemd/cara-etcd.service").read_text()
    api_unit = (ROOT / "deploy/systemd/cara-apiserver.service").read_text()
    assert "--trusted-ca-file=/etc/caravanserai/pki/etcd-ca.crt" in etcd_unit
    assert "--peer-trusted-ca-file=/etc/caravanserai/pki/etcd-ca.crt" in etcd_unit
    assert "pki/ca.crt" not in etcd_unit  # the fleet CA is not trusted by etcd
    assert "--etcd-cafile=/etc/caravanserai/pki/etcd-ca.crt" in api_unit
    assert "--etcd-certfile=/etc/caravanserai/pki/apiserver-etcd-client.crt" in api_unit
    assert "--encryption-key-file=" in api_unit
    for doc in ("docs/fleet.md", "deploy/etcd-cluster.md"):
        text = (ROOT / doc).read_text()
        assert "etcd-ca.crt" in text and "apiserver-etcd-client" in text and "encryption.keys" in text, doc
        assert not re.search(r"--trusted-ca-file[ =]\S*(?<!etcd-)ca\.crt", text), doc
