"""A Feishu (Lark) emulator: tenant token, IM messages, reactions, pins, CardKit, callbacks.

Paths and bodies follow ``openapi/feishu.json``; the modules of this package answer them:

* `emulator` (`FeishuEmulator`): tenant tokens, IM messages, reactions, pins;
* `cardkit`: CardKit card entities and their sequenced writes;
* `callbacks`: the person's messages and clicks delivered to the SDK;
* `chat`: the chat's state and the page's view of cards (`feishu_card_view()`);
* `crypto`: the callback encryption and signature (`feishu_encrypt()`,
  `feishu_signature()`).

User input goes back to the SDK as Feishu sends it: ``im.message.receive_v1`` events to
``events_url`` and ``card.action.trigger`` callbacks to ``card_url`` (schema 2.0
envelopes carrying the verification token). With an ``encrypt_key`` (the playground sets
one) the body is ``{"encrypt": base64(iv + AES-256-CBC(sha256(key), PKCS#7(json)))}`` and
``X-Lark-Signature = sha256_hex(timestamp + nonce + encrypt_key + body)`` with
``X-Lark-Request-Timestamp`` / ``X-Lark-Request-Nonce``. Key derivation, padding, framing
and the signature are computed from Feishu's documented algorithm; only the AES block
cipher itself (CBC, no padding) is reused from `channelkit.platforms.feishu.crypto`,
the standard library having none.
"""

from __future__ import annotations

from channelkit.playground.feishu.cardkit import MAX_CARD_BYTES, MAX_SEQUENCE, MAX_STREAM_CHARS
from channelkit.playground.feishu.chat import feishu_card_view
from channelkit.playground.feishu.crypto import feishu_encrypt, feishu_signature
from channelkit.playground.feishu.emulator import (
    MAX_TEXT_BYTES,
    TOKEN_LIFETIME,
    TOKEN_PATH,
    TOKEN_RENEW_BELOW,
    FeishuEmulator,
)

__all__ = [
    "MAX_CARD_BYTES",
    "MAX_SEQUENCE",
    "MAX_STREAM_CHARS",
    "MAX_TEXT_BYTES",
    "TOKEN_LIFETIME",
    "TOKEN_PATH",
    "TOKEN_RENEW_BELOW",
    "FeishuEmulator",
    "feishu_card_view",
    "feishu_encrypt",
    "feishu_signature",
]
