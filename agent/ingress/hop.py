"""The authenticated ingress hop: a forwarded request proves which node's agent forwarded it.

An `Internal` route is served only inside the cluster. A node address is no proof of that (a node reports its own
addresses, and NodeRestriction cannot check them), so the forwarding agent signs each forwarded request with its
node certificate's key (`node:<name>`, the certificate it authenticates to the apiserver with), and the receiving
ingress verifies the signature, the certificate and its common name against the cluster CA:

    X-Caravanserai-Hop: <forwarding node>;<unix time>;<base64 ECDSA/RSA/Ed25519 signature>
    X-Caravanserai-Hop-Cert: <base64 DER certificate of node:<forwarding node>>

Guarantees:

* **Bound to the request**: the signature covers the forwarding and receiving node, the time, the method, the
  Host header and the path with its query; a hop is accepted within `MAX_SKEW` seconds of its time (clocks of
  a fleet agree far better), so a captured hop replays only the same request to the same node, briefly.
* **Only node certificates**: a certificate the CA did not issue directly, expired, or whose common name is not
  `node:<the node the header names>`, is no hop (an admin's or a viewer's certificate is not a node).
* **Never leaked onwards**: the proxy drops both headers from every request it sends (`HOP_HEADERS`).
* Without node certificates (`cara-agent` without `--tls-*`: nothing is authenticated, the API included) there
  is no `HopAuth`; the ingress then falls back to the addresses nodes report (documented as unauthenticated).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
from collections.abc import Mapping
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import NameOID

from caravanserai.clock import Clock
from caravanserai.process.tls import TLSFiles

HOP = "X-Caravanserai-Hop"
HOP_CERT = "X-Caravanserai-Hop-Cert"
HOP_HEADERS = (HOP, HOP_CERT)
MAX_SKEW = 30.0
"""Seconds a signed hop stays valid either side of its time."""

SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey


class HopAuth:
    """Signs this node's forwarded requests and verifies those of other nodes (see the module docstring)."""

    def __init__(self, node: str, *, cert_pem: bytes, key_pem: bytes, ca_pem: bytes, clock: Clock) -> None:
        self.node = node
        self._clock = clock
        cert = x509.load_pem_x509_certificate(cert_pem)
        self._cert_b64 = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, SigningKey):
            raise ValueError("the node key must be an EC, RSA or Ed25519 key to sign ingress hops")
        self._key: SigningKey = key
        self._cas = x509.load_pem_x509_certificates(ca_pem)
        self._verified: dict[bytes, str] = {}  # certificate hash → its node name (chain and name checked)

    @classmethod
    def from_tls(cls, node: str, tls: TLSFiles | None, *, clock: Clock) -> HopAuth | None:
        """The hop authentication of an agent with a node certificate, key and CA (None without them)."""
        if tls is None or not (tls.cert and tls.key and tls.ca):
            return None
        return cls(node, cert_pem=_read(tls.cert), key_pem=_read(tls.key), ca_pem=_read(tls.ca), clock=clock)

    def sign(self, *, to: str, method: str, host: str, path: str) -> dict[str, str]:
        """The headers proving that this node forwards `method host path` to node `to` now."""
        when = f"{self._clock.now():.3f}"
        signature = _sign(self._key, _payload(self.node, to, when, method, host, path))
        return {HOP: f"{self.node};{when};{base64.b64encode(signature).decode()}", HOP_CERT: self._cert_b64}

    def verify(self, headers: Mapping[str, str], *, method: str, host: str, path: str) -> str | None:
        """The node that forwarded this request to this node, or None when the headers prove nothing."""
        hop, cert_b64 = headers.get(HOP, ""), headers.get(HOP_CERT, "")
        parts = hop.split(";")
        if len(parts) != 3 or not cert_b64:
            return None
        sender, when, signature_b64 = parts
        try:
            if abs(self._clock.now() - float(when)) > MAX_SKEW:
                return None
            der, signature = base64.b64decode(cert_b64, validate=True), base64.b64decode(signature_b64, validate=True)
            cert = self._node_certificate(der)
        except (ValueError, binascii.Error):
            return None
        if cert is None or self._verified.get(_digest(der)) != sender:
            return None
        payload = _payload(sender, self.node, when, method, host, path)
        return sender if _verifies(cert, signature, payload) else None

    def _node_certificate(self, der: bytes) -> x509.Certificate | None:
        """The certificate if the CA issued it, it is valid now and names a node; its node is remembered."""
        cert = x509.load_der_x509_certificate(der)
        now = datetime.datetime.fromtimestamp(self._clock.now(), tz=datetime.UTC)
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            return None
        digest = _digest(der)
        if digest in self._verified:
            return cert
        if not any(_issued_by(cert, ca) for ca in self._cas):
            return None
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        common = str(names[0].value) if names else ""
        if not common.startswith("node:"):
            return None
        if len(self._verified) > 1024:  # a fleet has far fewer nodes; never grows without bound
            self._verified.clear()
        self._verified[digest] = common.removeprefix("node:")
        return cert


def _read(path: str) -> bytes:
    return Path(path).expanduser().read_bytes()


def _payload(sender: str, receiver: str, when: str, method: str, host: str, path: str) -> bytes:
    return "\n".join(("caravanserai-hop/1", sender, receiver, when, method, host, path)).encode()


def _digest(der: bytes) -> bytes:
    return hashlib.sha256(der).digest()


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _sign(key: SigningKey, payload: bytes) -> bytes:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(payload, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(payload, padding.PKCS1v15(), hashes.SHA256())
    return key.sign(payload)


def _verifies(cert: x509.Certificate, signature: bytes, payload: bytes) -> bool:
    public = cert.public_key()
    try:
        if isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
        elif isinstance(public, rsa.RSAPublicKey):
            public.verify(signature, payload, padding.PKCS1v15(), hashes.SHA256())
        elif isinstance(public, ed25519.Ed25519PublicKey):
            public.verify(signature, payload)
        else:
            return False
    except InvalidSignature:
        return False
    return True


__all__ = ["HOP", "HOP_CERT", "HOP_HEADERS", "MAX_SKEW", "HopAuth"]
