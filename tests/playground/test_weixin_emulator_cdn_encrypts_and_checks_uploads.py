"""The Weixin emulator's CDN: the person's files are served encrypted under a key of
their own (never the plain bytes), and an upload is taken only when its body is the
announced file encrypted under the announced key."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator

import pytest
import requests
from channelkit.http import RetryPolicy
from channelkit.platforms.weixin.api import WeixinApi
from channelkit.platforms.weixin.files import ecb_decrypt, ecb_encrypt, encrypted_size
from channelkit.playground import EmulatorServer
from channelkit.playground.weixin import CDN_PATH

TOKEN = "wx-cdn-token"
USER = "wxid_cdn_user@im.wechat"
PDF = b"%PDF-1.7\n" + b"cdn " * 500


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(platform="weixin", bot_token=TOKEN, user_id=USER, hold_seconds=5.0) as emu:
        yield emu


def _api(emu: EmulatorServer) -> WeixinApi:
    return WeixinApi(TOKEN, base_url=emu.url, retry=RetryPolicy.never())


def test_a_persons_file_is_served_encrypted_under_its_own_key(server: EmulatorServer) -> None:
    files = [
        {"name": n, "contentType": "application/pdf", "base64": base64.b64encode(PDF).decode()}
        for n in ("a.pdf", "b.pdf")
    ]
    sent = requests.post(f"{server.url}/_emulator/send", json={"files": files}, timeout=5)
    assert sent.status_code == 200, sent.text
    (message,) = _api(server).get_updates("", 5.0).msgs  # type: ignore[union-attr]
    items = message["item_list"]
    assert [i["type"] for i in items] == [4, 4]
    keys = []
    for item in items:
        media = item["file_item"]["media"]
        url = f"{server.url}{CDN_PATH}/download"
        body = requests.get(url, params={"encrypted_query_param": media["encrypt_query_param"]})
        assert body.status_code == 200 and PDF not in body.content
        key = bytes.fromhex(base64.b64decode(media["aes_key"]).decode())
        assert ecb_decrypt(key, body.content) == PDF
        keys.append(key)
    assert keys[0] != keys[1]
    missing = requests.get(f"{server.url}{CDN_PATH}/download?encrypted_query_param=nope")
    assert missing.status_code == 404


@pytest.mark.parametrize("fault", ["md5", "key", "cut"])
def test_an_upload_not_matching_its_announcement_is_refused(
    server: EmulatorServer, fault: str
) -> None:
    requests.post(f"{server.url}/_emulator/send", json={"text": "hi"}, timeout=5)
    key, filekey = os.urandom(16), os.urandom(16).hex()
    md5 = hashlib.md5(b"other" if fault == "md5" else PDF).hexdigest()
    slot = _api(server).get_upload_url(
        filekey=filekey,
        media_type=3,
        to_user_id=USER,
        rawsize=len(PDF),
        rawfilemd5=md5,
        filesize=encrypted_size(len(PDF)),
        aeskey=key.hex(),
    )
    body = ecb_encrypt(os.urandom(16) if fault == "key" else key, PDF)
    answer = requests.post(
        f"{server.url}{CDN_PATH}/upload",
        params={"encrypted_query_param": slot.upload_param, "filekey": filekey},
        data=body[:-16] if fault == "cut" else body,
        headers={"Content-Type": "application/octet-stream"},
        timeout=5,
    )
    assert answer.status_code == 400
    assert answer.headers.get("x-error-message")
    assert "x-encrypted-param" not in answer.headers
