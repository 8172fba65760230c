"""The credentials of a `cara up` cluster, kept in its data directory (as kind and minikube keep theirs).

    <data-dir>/pki/ca.crt, ca.key                 the cluster's CA: the API server, the controllers, the agent, admin
    <data-dir>/pki/etcd-ca.crt, etcd-ca.key       a separate CA that etcd alone trusts (only the API server reaches it)
    <data-dir>/pki/apiserver.*, admin.*, controller-manager.*, node-<name>.*       from ca.crt
    <data-dir>/pki/etcd.*, apiserver-etcd-client.*                                from etcd-ca.crt
    <data-dir>/pki/encryption.keys                 the key encrypting Secrets in etcd (`--encryption-key-file`)
    <data-dir>/client.yaml                         a caractrl config file: the API address and the admin's files

Guarantees:

* `ensure(data, …)` makes what is missing and keeps what exists (a restarted cluster keeps its CA, its keys and so
  every Secret readable); the directory is 0700 and every file 0600, owned by the user who ran `cara up`.
* Certificates name `localhost`, `127.0.0.1`, `::1` and the hosts given (the addresses the cluster listens on).
* `admin_config_for(address)` finds the client config of a running `cara up` cluster serving the API at `address`
  that this user can read: how caractrl reaches a local cluster with the admin's credentials by default.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from caravanserai.cli.localcluster import running_clusters
from caravanserai.process.tls import TLSFiles

PKI_DIR = "pki"
CLIENT_CONFIG = "client.yaml"
ENCRYPTION_KEYS = "encryption.keys"
ETCD_CA_IDENTITIES = ("etcd", "apiserver-etcd-client")
VALIDITY = dt.timedelta(days=3650)


@dataclass(frozen=True, slots=True)
class LocalPKI:
    """The credentials of one cluster's data directory."""

    data: Path

    @property
    def dir(self) -> Path:
        return self.data / PKI_DIR

    @property
    def encryption_keys(self) -> Path:
        return self.dir / ENCRYPTION_KEYS

    @property
    def client_config(self) -> Path:
        return self.data / CLIENT_CONFIG

    def tls(self, identity: str) -> TLSFiles:
        """The certificate, key and the CA that verifies its peers, of `identity`."""
        name = identity.replace(":", "-")
        ca = "etcd-ca.crt" if identity in ETCD_CA_IDENTITIES else "ca.crt"
        return TLSFiles(cert=str(self.dir / f"{name}.crt"), key=str(self.dir / f"{name}.key"), ca=str(self.dir / ca))


def _write_private(path: Path, data: bytes) -> None:
    """Write `path` readable by its owner only (0600 from its creation on)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load(directory: Path, name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate((directory / f"{name}.crt").read_bytes())
    key = serialization.load_pem_private_key((directory / f"{name}.key").read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def _ca(
    directory: Path, name: str, common_name: str, now: dt.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The CA `name` of `directory`, made when missing."""
    if (directory / f"{name}.key").exists() and (directory / f"{name}.crt").exists():
        return _load(directory, name)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    _write_private(directory / f"{name}.key", _key_pem(key))
    _write_private(directory / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(["localhost", "127.0.0.1", "::1", *hosts]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _issue(
    directory: Path,
    identity: str,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    hosts: list[str],
    now: dt.datetime,
) -> None:
    """A certificate and key for `identity` (its common name), server and client use, unless one exists."""
    name = identity.replace(":", "-")
    if (directory / f"{name}.crt").exists() and (directory / f"{name}.key").exists():
        return
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, identity)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(_names(hosts)), critical=False)
        .add_extension(usage, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(directory / f"{name}.key", _key_pem(key))
    _write_private(directory / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM))


def ensure(data: Path, *, api_listen: str, node_name: str, hosts: list[str], now: dt.datetime) -> LocalPKI:
    """Make the cluster's missing credentials in `data` (see the module docstring) and its client config."""
    pki = LocalPKI(data)
    pki.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(pki.dir, 0o700)
    ca = _ca(pki.dir, "ca", "caravanserai-local-ca", now)
    etcd_ca = _ca(pki.dir, "etcd-ca", "caravanserai-local-etcd-ca", now)
    identities = ["apiserver", "admin", "controller:manager", *([f"node:{node_name}"] if node_name else [])]
    for identity in identities:
        _issue(pki.dir, identity, ca, hosts, now)
    for identity in ETCD_CA_IDENTITIES:
        _issue(pki.dir, identity, etcd_ca, [], now)
    if not pki.encryption_keys.exists():
        line = f"local {base64.b64encode(os.urandom(32)).decode()}\n"
        _write_private(pki.encryption_keys, line.encode())
    _write_client_config(pki, api_listen)
    return pki


def _write_client_config(pki: LocalPKI, api_listen: str) -> None:
    admin = pki.tls("admin")
    text = (
        "# caractrl's config for the cara up cluster of this directory (caractrl --config FILE); written by cara up\n"
        f"server: {api_listen}\n"
        "tls:\n"
        f"  ca: {os.path.relpath(admin.ca, pki.data)}\n"
        f"  cert: {os.path.relpath(admin.cert, pki.data)}\n"
        f"  key: {os.path.relpath(admin.key, pki.data)}\n"
    )
    _write_private(pki.client_config, text.encode())


def admin_config_for(address: str) -> Path | None:
    """The client config of a running `cara up` cluster whose API is at `address` and whose files this user may
    read; None when there is none (another user's cluster, an `--insecure` one, or no cluster at all)."""
    for cluster in running_clusters():
        if cluster.api_listen != address or not cluster.data_dir:
            continue
        config = Path(cluster.data_dir) / CLIENT_CONFIG
        if os.access(config, os.R_OK):
            return config
    return None


__all__ = ["CLIENT_CONFIG", "ENCRYPTION_KEYS", "PKI_DIR", "LocalPKI", "admin_config_for", "ensure"]
