"""TLS settings shared by every process: `--tls-cert`, `--tls-key`, `--tls-ca` become gRPC credentials.

A server with a CA requires and verifies client certificates (mutual TLS); the client identity is the
certificate's common name (`node:<name>`, `controller:<name>`, `admin`, …).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """Paths of a PEM certificate, its key and the CA bundle that verifies the peer. Empty = not configured."""

    cert: str = ""
    key: str = ""
    ca: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.cert or self.key or self.ca)

    def _read(self, path: str, what: str) -> bytes:
        try:
            return Path(path).expanduser().read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read TLS {what} {path}: {exc.strerror}") from None

    def server_credentials(self) -> grpc.ServerCredentials:
        """Server credentials; with a CA, client certificates are required and verified."""
        if not (self.cert and self.key):
            raise ValueError("a TLS server needs both --tls-cert and --tls-key")
        pair = (self._read(self.key, "key"), self._read(self.cert, "certificate"))
        ca = self._read(self.ca, "CA") if self.ca else None
        return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=ca is not None)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """Client credentials: verify the server with the CA, present our certificate when configured."""
        ca = self._read(self.ca, "CA") if self.ca else None
        key = self._read(self.key, "key") if self.key else None
        cert = self._read(self.cert, "certificate") if self.cert else None
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


__all__ = ["TLSFiles"]
