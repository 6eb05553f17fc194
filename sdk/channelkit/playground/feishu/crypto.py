"""The Feishu callback algorithm as the emulator applies it: encryption and signature.

Key derivation, padding, framing and the signature are computed here from Feishu's
documented algorithm; only the AES block cipher itself (CBC, no padding) is reused from
`channelkit.platforms.feishu.crypto`, the standard library having none.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["feishu_encrypt", "feishu_signature", "seal"]


def feishu_encrypt(encrypt_key: str, plaintext: bytes, *, iv: bytes | None = None) -> str:
    """Feishu's ``encrypt`` field: ``base64(iv + AES-256-CBC(sha256(key), PKCS#7(text)))``."""
    from channelkit.platforms.feishu.crypto import aes256_cbc_encrypt  # the block cipher only

    key = hashlib.sha256(encrypt_key.encode("utf-8")).digest()
    iv = os.urandom(16) if iv is None else iv
    if len(iv) != 16:
        raise ValueError("iv: must be 16 bytes")
    pad = 16 - len(plaintext) % 16
    padded = plaintext + bytes([pad]) * pad
    return base64.b64encode(iv + aes256_cbc_encrypt(key, iv, padded, pad=False)).decode("ascii")


def feishu_signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """``X-Lark-Signature``: ``sha256_hex((timestamp + nonce + encrypt_key) + body)``."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode("utf-8") + body).hexdigest()


def seal(encrypt_key: str | None, payload: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
    """Headers and body of a callback as Feishu sends it (encrypted and signed when an
    encrypt key is set)."""
    plain = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    timestamp = str(int(time.time()))
    nonce = secrets.token_hex(8)
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "X-Lark-Request-Timestamp": timestamp,
        "X-Lark-Request-Nonce": nonce,
    }
    if not encrypt_key:
        return headers, plain
    body = json.dumps({"encrypt": feishu_encrypt(encrypt_key, plain)}).encode("utf-8")
    headers["X-Lark-Signature"] = feishu_signature(timestamp, nonce, encrypt_key, body)
    return headers, body
