"""The TLS files `deploy/certs.sh` makes for an identity, as the client takes them."""

from __future__ import annotations

from pathlib import Path

from caravanserai.process.tls import TLSFiles


def tls_for(certs: Path, identity: str, *, ca: str = "ca.crt") -> TLSFiles:
    """Certificate, key and CA of `identity` (`node:w0` is in files `node-w0.*`) in the directory `certs`."""
    name = identity.replace(":", "-")
    return TLSFiles(cert=str(certs / f"{name}.crt"), key=str(certs / f"{name}.key"), ca=str(certs / ca))


__all__ = ["tls_for"]
