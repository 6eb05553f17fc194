"""Feishu's AES-256-CBC gives the same bytes and errors with and without ``cryptography``.

With ``cryptography`` installed the block work goes to its C cipher (a burst of encrypted
events would otherwise spend about 4 ms of one core per event); without it the pure-Python
cipher does it. Both must decrypt what Feishu sends and refuse what it would not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from channelkit.platforms.feishu import crypto
from channelkit.platforms.feishu.crypto import (
    DecryptionError,
    aes256_cbc_decrypt,
    aes256_cbc_encrypt,
    decrypt_event,
    encrypt_event,
)

pytest.importorskip("cryptography.hazmat.primitives.ciphers")

# NIST SP 800-38A, F.2.5 / F.2.6 (CBC-AES256)
KEY = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
IV = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
PLAIN = bytes.fromhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
CIPHER = bytes.fromhex("f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d")


@pytest.fixture(params=["C cipher", "pure Python"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "pure Python":
        monkeypatch.setattr(crypto, "_cipher_module", lambda: None)
    yield str(request.param)


def test_the_c_cipher_is_used_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[bool] = []
    real = crypto._c_cbc

    def spying(key: bytes, iv: bytes, data: bytes, *, decrypt: bool) -> bytes | None:
        result = real(key, iv, data, decrypt=decrypt)
        used.append(result is not None)
        return result

    monkeypatch.setattr(crypto, "_c_cbc", spying)
    assert decrypt_event("k", encrypt_event("k", {"text": "p1"})) == {"text": "p1"}
    assert used == [True, True]


def test_nist_vectors(backend: str) -> None:
    assert aes256_cbc_encrypt(KEY, IV, PLAIN, pad=False) == CIPHER
    assert aes256_cbc_decrypt(KEY, IV, CIPHER, unpad=False) == PLAIN


def test_both_backends_give_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [(os.urandom(n), os.urandom(32), os.urandom(16)) for n in (0, 1, 15, 16, 17, 600)]
    fast = [aes256_cbc_encrypt(key, iv, data) for data, key, iv in cases]
    monkeypatch.setattr(crypto, "_cipher_module", lambda: None)
    slow = [aes256_cbc_encrypt(key, iv, data) for data, key, iv in cases]
    assert fast == slow
    for (data, key, iv), sealed in zip(cases, slow, strict=True):
        assert aes256_cbc_decrypt(key, iv, sealed) == data


@pytest.mark.parametrize("ciphertext", [b"", b"\x00" * 15, b"\x00" * 17])
def test_bad_lengths_are_refused(backend: str, ciphertext: bytes) -> None:
    with pytest.raises(DecryptionError, match="multiple of 16"):
        aes256_cbc_decrypt(KEY, IV, ciphertext)


def test_bad_padding_is_refused(backend: str) -> None:
    with pytest.raises(DecryptionError, match="padding"):
        aes256_cbc_decrypt(KEY, IV, CIPHER)


def test_a_key_of_the_wrong_size_is_refused(backend: str) -> None:
    with pytest.raises(ValueError, match="32-byte key"):
        aes256_cbc_decrypt(KEY[:16], IV, CIPHER)
    with pytest.raises(ValueError, match="32-byte key"):
        aes256_cbc_encrypt(KEY[:16], IV, PLAIN)


def test_a_wrong_encrypt_key_is_a_decryption_error(backend: str) -> None:
    sealed = encrypt_event("right key", {"event": {"text": "hello"}})
    with pytest.raises(DecryptionError):
        decrypt_event("wrong key", sealed)
