"""Encryption at rest: values of chosen resources (Secrets) are AES-256-GCM ciphertext in etcd.

Key file (`cara-apiserver --encryption-key-file FILE`): one key per line, `<key id> <base64 of 32 bytes>`;
blank lines and `#` comments are ignored. The **first** key encrypts every write; every listed key decrypts, so
rotation is: put a new key first, keep the old one listed, rewrite every Secret (any write re-encrypts it, e.g.
`caractrl annotate secret NAME caravanserai.io/rewritten=<time> --overwrite`), then drop the old key. Make a key
with `head -c 32 /dev/urandom | base64`.

Stored form: `cara:enc:aesgcm:v1:<key id>:` + 12-byte random nonce + ciphertext and tag; the key, the stored
object's resource and name are bound in as associated data, so a ciphertext copied to another key does not
decrypt. Values without the prefix are read as plaintext (objects written before encryption was turned on).

Guarantees: a value sealed with any listed key opens; a value under an unlisted key id, or tampered with, raises
`InternalError` naming the key id (never a value); the `cryptography` library does the cryptography.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from caravanserai.errors import InternalError

PREFIX = b"cara:enc:aesgcm:v1:"
KEY_BYTES = 32
NONCE_BYTES = 12


@dataclass(frozen=True, slots=True)
class EncryptionKey:
    """One key: its id (written into every value it seals) and its 32 bytes."""

    key_id: str
    secret: bytes

    def __repr__(self) -> str:
        return f"EncryptionKey({self.key_id!r})"


def load_key_file(path: str) -> list[EncryptionKey]:
    """The keys of a key file, first (the write key) first; ValueError naming the line for anything else."""
    keys: list[EncryptionKey] = []
    for number, line in enumerate(Path(path).expanduser().read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        if len(parts) != 2 or not parts[0].isascii() or ":" in parts[0]:
            raise ValueError(f"{path}:{number}: expected '<key id> <base64 key>'")
        try:
            secret = base64.b64decode(parts[1], validate=True)
        except binascii.Error:
            raise ValueError(f"{path}:{number}: the key is not base64") from None
        if len(secret) != KEY_BYTES:
            raise ValueError(f"{path}:{number}: the key must be {KEY_BYTES} bytes, not {len(secret)}")
        keys.append(EncryptionKey(parts[0], secret))
    if not keys:
        raise ValueError(f"{path}: no keys")
    ids = [k.key_id for k in keys]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate key id")
    return keys


class Encryption:
    """Seals and opens the stored values of `resources` (see the module docstring)."""

    def __init__(self, keys: list[EncryptionKey], *, resources: Iterable[str]) -> None:
        if not keys:
            raise ValueError("encryption needs at least one key")
        self._write = keys[0]
        self._ciphers = {k.key_id: AESGCM(k.secret) for k in keys}
        self.resources = frozenset(resources)

    def seal(self, resource: str, name: str, value: bytes) -> bytes:
        if resource not in self.resources:
            return value
        nonce = os.urandom(NONCE_BYTES)
        header = PREFIX + self._write.key_id.encode() + b":"
        sealed = self._ciphers[self._write.key_id].encrypt(nonce, value, _aad(header, resource, name))
        return header + nonce + sealed

    def open(self, resource: str, name: str, value: bytes) -> bytes:
        if resource not in self.resources or not value.startswith(PREFIX):
            return value
        key_id, sep, rest = value[len(PREFIX) :].partition(b":")
        cipher = self._ciphers.get(key_id.decode(errors="replace"))
        if not sep or cipher is None:
            raise InternalError(
                f"{resource}/{name} is encrypted with key {key_id.decode(errors='replace')!r}, "
                "which is not in the encryption key file"
            )
        header = value[: len(PREFIX) + len(key_id) + 1]
        try:
            return cipher.decrypt(rest[:NONCE_BYTES], rest[NONCE_BYTES:], _aad(header, resource, name))
        except InvalidTag:
            raise InternalError(f"{resource}/{name} does not decrypt with key {key_id.decode()!r}") from None


def _aad(header: bytes, resource: str, name: str) -> bytes:
    return header + resource.encode() + b"/" + name.encode()


__all__ = ["Encryption", "EncryptionKey", "KEY_BYTES", "PREFIX", "load_key_file"]
