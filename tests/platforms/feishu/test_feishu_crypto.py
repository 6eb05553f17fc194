"""AES-256-CBC (own implementation) against FIPS-197 / NIST SP 800-38A vectors, and
the Feishu framing and signature."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest
from channelkit.platforms.feishu import crypto
from channelkit.platforms.feishu.crypto import (
    DecryptionError,
    aes256_cbc_decrypt,
    aes256_cbc_encrypt,
    decrypt_event,
    encrypt_event,
    feishu_signature,
    verify_signature,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# NIST SP 800-38A, F.2.5 / F.2.6 (CBC-AES256.Encrypt / .Decrypt)
KEY = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
IV = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
PLAIN = bytes.fromhex(
    "6bc1bee22e409f96e93d7e117393172a"
    "ae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52ef"
    "f69f2445df4f9b17ad2b417be66c3710"
)
CIPHER = bytes.fromhex(
    "f58c4c04d6e5f1ba779eabfb5f7bfbd6"
    "9cfc4e967edb808d679f777bc6702c7d"
    "39f23369a9d9bacfa530e26304231461"
    "b2eb05e2c39be9fcda6c19078c6a9d1b"
)


def test_fips197_appendix_c3_block() -> None:
    key = bytes(range(32))
    plain = bytes.fromhex("00112233445566778899aabbccddeeff")
    rk = crypto._expand_key(key)
    block = crypto._encrypt_block(plain, rk)
    assert block.hex() == "8ea2b7ca516745bfeafc49904b496089"
    assert crypto._decrypt_block(block, crypto._inverse_round_keys(rk)) == plain


def test_sp800_38a_cbc_aes256_encrypt() -> None:
    assert aes256_cbc_encrypt(KEY, IV, PLAIN, pad=False) == CIPHER


def test_sp800_38a_cbc_aes256_decrypt() -> None:
    assert aes256_cbc_decrypt(KEY, IV, CIPHER, unpad=False) == PLAIN


def test_sp800_38a_blocks_chain_individually() -> None:
    # decrypting block i with block i-1 as IV gives plaintext block i
    for i in range(1, 4):
        prev, block = CIPHER[16 * (i - 1) : 16 * i], CIPHER[16 * i : 16 * (i + 1)]
        assert aes256_cbc_decrypt(KEY, prev, block, unpad=False) == PLAIN[16 * i : 16 * (i + 1)]


@settings(max_examples=40, deadline=None)
@given(
    st.binary(max_size=200),
    st.binary(min_size=32, max_size=32),
    st.binary(min_size=16, max_size=16),
)
def test_round_trip_with_padding(data: bytes, key: bytes, iv: bytes) -> None:
    assert aes256_cbc_decrypt(key, iv, aes256_cbc_encrypt(key, iv, data)) == data


def test_matches_cryptography_when_available() -> None:
    ciphers = pytest.importorskip("cryptography.hazmat.primitives.ciphers")
    for n in (0, 1, 15, 16, 17, 100):
        data, key, iv = os.urandom(n), os.urandom(32), os.urandom(16)
        enc = ciphers.Cipher(ciphers.algorithms.AES(key), ciphers.modes.CBC(iv)).encryptor()
        pad = 16 - n % 16
        theirs = enc.update(data + bytes([pad]) * pad) + enc.finalize()
        assert aes256_cbc_encrypt(key, iv, data) == theirs
        assert aes256_cbc_decrypt(key, iv, theirs) == data


@pytest.mark.parametrize(
    "ciphertext",
    [b"", b"\x00" * 15, b"\x00" * 17],
)
def test_bad_lengths_rejected(ciphertext: bytes) -> None:
    with pytest.raises(DecryptionError):
        aes256_cbc_decrypt(KEY, IV, ciphertext)


def test_bad_padding_rejected() -> None:
    # PLAIN ends in 0x10 but is not a full block of 0x10 bytes: invalid PKCS#7.
    with pytest.raises(DecryptionError):
        aes256_cbc_decrypt(KEY, IV, CIPHER)


def test_feishu_event_round_trip_and_key_derivation() -> None:
    payload = {"challenge": "abc", "token": "tok", "type": "url_verification"}
    encrypted = encrypt_event("my-encrypt-key", payload)
    raw = base64.b64decode(encrypted)
    key = hashlib.sha256(b"my-encrypt-key").digest()
    assert aes256_cbc_decrypt(key, raw[:16], raw[16:]).startswith(b'{"challenge"')
    assert decrypt_event("my-encrypt-key", encrypted) == payload


@pytest.mark.parametrize(
    "value",
    [
        "not base64!!",
        base64.b64encode(b"short").decode(),
        # Fixed noise (not os.urandom: a random parameter gets a different test id in
        # every process, and parallel workers then disagree on what was collected).
        base64.b64encode((hashlib.sha256(b"noise").digest() * 2)[:48]).decode(),
    ],
    ids=["not-base64", "shorter-than-a-block", "noise-bad-padding-or-json"],
)
def test_feishu_bad_ciphertext(value: str) -> None:
    with pytest.raises(DecryptionError):
        decrypt_event("k", value)


def test_wrong_key_never_returns_data() -> None:
    encrypted = encrypt_event("right", {"a": 1})
    with pytest.raises(DecryptionError):
        decrypt_event("wrong", encrypted)


def test_signature() -> None:
    body = b'{"encrypt":"xyz"}'
    expected = hashlib.sha256(b"1700000000" + b"nonce" + b"key" + body).hexdigest()
    assert feishu_signature("1700000000", "nonce", "key", body) == expected
    assert verify_signature("1700000000", "nonce", "key", body, expected)
    assert verify_signature("1700000000", "nonce", "key", body, expected.upper())
    assert not verify_signature("1700000000", "nonce", "key", body + b" ", expected)
    assert not verify_signature("1700000001", "nonce", "key", body, expected)
