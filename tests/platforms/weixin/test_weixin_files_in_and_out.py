"""Weixin media both ways: a message's image, voice, file and video items become
attachments fetched from the CDN only and decrypted (AES-128-ECB, PKCS#7) with the
message's key; the agent's file is encrypted for the upload, the upload URL stays on the
CDN; the cipher gives the same bytes with and without ``cryptography``."""

from __future__ import annotations

import base64
import io
import os
from typing import Any

import pytest
from channelkit.attachments.model import AttachmentKind
from channelkit.attachments.outbound import outbound_source
from channelkit.clients.weixin import GetUploadUrlResponse
from channelkit.errors import AttachmentRefused
from channelkit.platforms.feishu import crypto
from channelkit.platforms.weixin.adapter import parse_weixin_message
from channelkit.platforms.weixin.files import (
    EcbDecryptor,
    EncryptingReader,
    ecb_decrypt,
    ecb_encrypt,
    encrypted_size,
    media_source,
    parse_media,
    upload,
)

KEY = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
CDN = "https://novac2c.cdn.weixin.qq.com/c2c"


@pytest.fixture(params=["c", "pure"])
def cipher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure":
        monkeypatch.setattr(crypto, "_cipher_module", lambda: None)
    elif crypto._cipher_module() is None:
        pytest.skip("cryptography is not installed")
    return str(request.param)


def test_aes_128_ecb_matches_fips_197(cipher: str) -> None:
    plain = bytes.fromhex("00112233445566778899aabbccddeeff")
    encrypted = crypto.aes_ecb(KEY, plain, decrypt=False)
    assert encrypted.hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"
    assert crypto.aes_ecb(KEY, encrypted, decrypt=True) == plain


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 70_000])
def test_pkcs7_round_trip_streamed_both_ways(cipher: str, size: int) -> None:
    plain = os.urandom(size)
    encrypted = ecb_encrypt(KEY, plain)
    assert len(encrypted) == encrypted_size(size) and len(encrypted) % 16 == 0
    assert len(encrypted) > size
    reader = EncryptingReader(KEY, size, lambda: io.BytesIO(plain))
    streamed = b"".join(iter(lambda: reader.read(1000), b""))
    assert streamed == encrypted and len(reader) == len(encrypted)
    decryptor = EcbDecryptor(KEY)
    pieces = [decryptor.update(encrypted[i : i + 7]) for i in range(0, len(encrypted), 7)]
    assert b"".join(pieces) + decryptor.finish() == plain


def test_the_c_and_pure_ciphers_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    if crypto._cipher_module() is None:
        pytest.skip("cryptography is not installed")
    plain = os.urandom(4000)
    fast = ecb_encrypt(KEY, plain)
    monkeypatch.setattr(crypto, "_cipher_module", lambda: None)
    assert ecb_encrypt(KEY, plain) == fast
    assert ecb_decrypt(KEY, fast) == plain


def test_a_wrong_key_or_a_cut_body_is_refused() -> None:
    encrypted = ecb_encrypt(KEY, b"hello weixin")
    with pytest.raises(ValueError, match="padding"):
        ecb_decrypt(bytes(16), encrypted)
    with pytest.raises(ValueError, match="16-byte blocks"):
        ecb_decrypt(KEY, encrypted[:-1])


def _media(param: str, key: bytes) -> dict[str, Any]:
    hexed = base64.b64encode(key.hex().encode()).decode()
    return {"encrypt_query_param": param, "aes_key": hexed, "encrypt_type": 1}


def test_media_items_become_attachments_with_their_keys() -> None:
    raw_key = base64.b64encode(KEY).decode()
    items = [
        {"type": 1, "text_item": {"text": "look"}},
        {"type": 2, "image_item": {"media": {"encrypt_query_param": "p1"}, "aeskey": KEY.hex()}},
        {"type": 3, "voice_item": {"media": _media("p2", KEY), "playtime": 2500}},
        {
            "type": 4,
            "file_item": {"media": _media("p3", KEY), "file_name": "q3.pdf", "len": "36009"},
        },
        {"type": 5, "video_item": {"media": {"encrypt_query_param": "p4", "aes_key": raw_key}}},
    ]
    image, voice, document, video = parse_media(items)
    assert [a.kind for a in (image, voice, document, video)] == [
        AttachmentKind.IMAGE,
        AttachmentKind.AUDIO,
        AttachmentKind.FILE,
        AttachmentKind.VIDEO,
    ]
    assert voice.duration == 2.5 and document.size == 36009 and document.name == "q3.pdf"
    for attachment, param in zip((image, voice, document, video), "1234", strict=True):
        assert attachment.reference == f"{KEY.hex()}:p{param}"
    message = {"from_user_id": "u@im.wechat", "message_id": 9, "item_list": items[1:2]}
    assert parse_weixin_message(message)[1] == ""  # media alone is a message


def test_the_download_is_on_the_cdn_and_decrypts() -> None:
    (attachment,) = parse_media([{"type": 4, "file_item": {"media": _media("a/b+c=", KEY)}}])
    source = media_source(attachment, CDN)
    assert source.url == f"{CDN}/download?encrypted_query_param=a%2Fb%2Bc%3D"
    assert source.allowed_redirect_hosts == () and not source.headers
    assert source.transform is not None
    decryptor = source.transform()
    assert decryptor.update(ecb_encrypt(KEY, b"data")) + decryptor.finish() == b"data"


def test_media_without_a_key_or_reference_is_refused_not_dropped() -> None:
    no_key, no_param = parse_media(
        [
            {"type": 2, "image_item": {"media": {"encrypt_query_param": "p"}}},
            {"type": 4, "file_item": {"media": {"aes_key": KEY.hex()}, "file_name": "x.txt"}},
        ]
    )
    with pytest.raises(AttachmentRefused, match="no AES key"):
        media_source(no_key, CDN)
    with pytest.raises(AttachmentRefused, match="no CDN reference"):
        media_source(no_param, CDN)


class _Api:
    def __init__(self, answer: GetUploadUrlResponse) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []
        self.sent: list[Any] = []

    def get_upload_url(self, **fields: Any) -> GetUploadUrlResponse:
        self.asked.append(fields)
        return self.answer

    def send_items(self, *args: Any) -> str:
        self.sent.append(args)
        return "id"


def test_an_upload_url_off_the_cdn_is_refused_before_a_byte_is_sent() -> None:
    api = _Api(GetUploadUrlResponse(upload_full_url="https://evil.example/upload?x=1"))
    file = outbound_source(b"%PDF-1.7\n" * 10, "/", name="r.pdf")
    with pytest.raises(AttachmentRefused, match="outside its CDN"):
        upload(api, file, to_user_id="u", context_token=None, cdn_base_url=CDN)  # type: ignore[arg-type]
    (asked,) = api.asked
    assert asked["rawsize"] == 90 and asked["filesize"] == 96 and asked["media_type"] == 3
    assert len(asked["aeskey"]) == 32 and len(asked["rawfilemd5"]) == 32
    assert api.sent == []


def test_an_empty_file_is_refused_before_asking() -> None:
    api = _Api(GetUploadUrlResponse(upload_param="p"))
    with pytest.raises(AttachmentRefused, match="empty"):
        upload(api, outbound_source(b"", "/", name="e.txt"), to_user_id="u", context_token=None)  # type: ignore[arg-type]
    assert api.asked == []
