"""A download's transform (a CDN's AES-128-ECB decryption) runs chunk by chunk before
the bytes are counted, capped, hashed, sniffed and written: what lands on disk and what
`ReceivedFile` says are the decrypted file's; a body the transform refuses leaves
nothing behind."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import requests
from channelkit.attachments import DownloadLimits, MessageBudget, download
from channelkit.errors import AttachmentFailed, AttachmentTooLarge
from channelkit.platforms.weixin.files import EcbDecryptor, ecb_encrypt

from tests.attachments.file_server import FileServer, Route

KEY = bytes(range(16))
PDF = b"%PDF-1.7\n" + os.urandom(300_000)


def _serve(file_server: FileServer, plain: bytes, **route: object) -> str:
    file_server.routes["/enc"] = Route(body=ecb_encrypt(KEY, plain), **route)  # type: ignore[arg-type]
    return file_server.url("/enc")


@pytest.mark.parametrize("send_length", [True, False], ids=["length", "no-length"])
def test_the_decrypted_file_is_written_hashed_and_sniffed(
    file_server: FileServer, session: requests.Session, tmp_path: Path, send_length: bool
) -> None:
    url = _serve(file_server, PDF, send_length=send_length)
    got = download(
        session,
        url,
        tmp_path,
        name="q3.pdf",
        transform=lambda: EcbDecryptor(KEY),
        limits=DownloadLimits(chunk_size=4096),
    )
    assert got.path.read_bytes() == PDF
    assert (got.size, got.sha256) == (len(PDF), hashlib.sha256(PDF).hexdigest())
    assert got.content_type == "application/pdf"


def test_a_file_exactly_at_the_cap_is_not_refused_for_its_padding(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    plain = b"%PDF-1.7\n" + bytes(1000 - 9)
    url = _serve(file_server, plain)  # Content-Length 1008: the cap plus the padding
    got = download(
        session,
        url,
        tmp_path,
        name="a.pdf",
        transform=lambda: EcbDecryptor(KEY),
        limits=DownloadLimits(per_file=1000),
    )
    assert got.size == 1000


def test_the_cap_counts_decrypted_bytes_and_keeps_nothing(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    url = _serve(file_server, PDF, send_length=False)
    budget = MessageBudget(10 * 2**20)
    with pytest.raises(AttachmentTooLarge) as caught:
        download(
            session,
            url,
            tmp_path,
            name="big.pdf",
            transform=lambda: EcbDecryptor(KEY),
            limits=DownloadLimits(per_file=100_000),
            budget=budget,
        )
    assert caught.value.limit == 100_000
    assert list(tmp_path.iterdir()) == []
    assert budget.remaining == budget.limit


def test_a_body_under_another_key_fails_and_leaves_nothing(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    url = _serve(file_server, PDF)
    budget = MessageBudget(10 * 2**20)
    with pytest.raises(AttachmentFailed) as caught:
        download(
            session,
            url,
            tmp_path,
            name="x.pdf",
            transform=lambda: EcbDecryptor(bytes(16)),
            budget=budget,
        )
    assert "could not be decoded" in caught.value.reason and not caught.value.retryable
    assert list(tmp_path.iterdir()) == []
    assert budget.remaining == budget.limit


def test_a_body_cut_mid_block_fails(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/cut"] = Route(body=ecb_encrypt(KEY, PDF)[:-5], send_length=False)
    with pytest.raises(AttachmentFailed, match="16-byte blocks"):
        download(
            session,
            file_server.url("/cut"),
            tmp_path,
            name="x.pdf",
            transform=lambda: EcbDecryptor(KEY),
        )
    assert list(tmp_path.iterdir()) == []
