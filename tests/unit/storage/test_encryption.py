"""Encryption at rest (storage/encryption.py): AES-GCM with key ids, rotation, refusals."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from caravanserai.errors import InternalError
from caravanserai.storage.encryption import PREFIX, Encryption, EncryptionKey, load_key_file


def key(name: str) -> EncryptionKey:
    return EncryptionKey(name, os.urandom(32))


def test_seal_open_and_rotation() -> None:
    old, new = key("old"), key("new")
    before = Encryption([old], resources=["secrets"])
    sealed = before.seal("secrets", "db", b"value")
    assert sealed.startswith(PREFIX + b"old:") and b"value" not in sealed
    assert before.seal("configs", "c", b"plain") == b"plain"  # other resources stay as they are
    after = Encryption([new, old], resources=["secrets"])
    assert after.open("secrets", "db", sealed) == b"value"  # the old key still reads
    assert after.seal("secrets", "db", b"value").startswith(PREFIX + b"new:")  # the first key writes
    assert after.open("secrets", "db", b"written before encryption") == b"written before encryption"


def test_refusals_name_the_key_never_the_value() -> None:
    sealed = Encryption([key("gone")], resources=["secrets"]).seal("secrets", "db", b"value")
    with pytest.raises(InternalError, match="key 'gone', which is not in the encryption key file"):
        Encryption([key("other")], resources=["secrets"]).open("secrets", "db", sealed)
    same = key("k")
    box = Encryption([same], resources=["secrets"])
    moved = box.seal("secrets", "a", b"value")
    with pytest.raises(InternalError, match="does not decrypt"):  # bound to its name: no copying between keys
        box.open("secrets", "b", moved)


def test_key_file(tmp_path: Path) -> None:
    good = tmp_path / "keys"
    good.write_text(
        f"# rotation\nnew {base64.b64encode(os.urandom(32)).decode()}\n\n"
        f"old {base64.b64encode(os.urandom(32)).decode()}\n"
    )
    assert [k.key_id for k in load_key_file(str(good))] == ["new", "old"]
    for text, message in (
        ("", "no keys"),
        ("a b c\n", "expected '<key id> <base64 key>'"),
        ("a !!!\n", "not base64"),
        (f"a {base64.b64encode(b'short').decode()}\n", "must be 32 bytes"),
    ):
        bad = tmp_path / "bad"
        bad.write_text(text)
        with pytest.raises(ValueError, match=message):
            load_key_file(str(bad))
