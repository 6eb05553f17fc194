"""A download arrives byte for byte, is capped while streaming, never follows a redirect
off the platform's hosts, and its type comes from its bytes."""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from pathlib import Path

import pytest
import requests
from channelkit.attachments import DownloadLimits, MessageBudget, download
from channelkit.errors import AttachmentFailed, AttachmentRefused, AttachmentTooLarge

from tests.attachments.file_server import FileServer, Route

CHUNK = 64 * 1024
# bytes the client and server kernels may hold beyond what the client read
KERNEL_SLACK = 256 * 1024


def _png(width: int = 64, height: int = 64) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_an_image_arrives_byte_for_byte(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    body = _png()
    file_server.routes["/img"] = Route(body=body, content_type="image/png")
    got = download(session, file_server.url("/img"), tmp_path, name="photo.png")
    assert got.sha256 == hashlib.sha256(body).hexdigest()
    assert hashlib.sha256(got.path.read_bytes()).hexdigest() == got.sha256
    assert (got.size, got.content_type, got.name) == (len(body), "image/png", "photo.png")
    with got.open() as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_large_file_without_length_arrives_byte_for_byte(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    block = os.urandom(100_000)
    file_server.routes["/f"] = Route(body=block, send_length=False, repeat=30)
    got = download(session, file_server.url("/f"), tmp_path, name="data.bin")
    expected = hashlib.sha256(block * 30).hexdigest()
    assert (got.sha256, got.size) == (expected, 3_000_000)
    assert got.content_type == "application/octet-stream"


def test_a_declared_length_over_the_cap_is_refused_before_any_body_byte(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/big"] = Route(body=b"x" * CHUNK, repeat=100, wait_for_close=True)
    limits = DownloadLimits(per_file=1024 * 1024)
    with pytest.raises(AttachmentTooLarge) as caught:
        download(session, file_server.url("/big"), tmp_path, name="big.iso", limits=limits)
    assert caught.value.limit == 1024 * 1024
    assert "big.iso" in str(caught.value) and "1048576 bytes" in str(caught.value)
    assert file_server.sent.get("/big", 0) == 0
    assert _files_in(tmp_path) == []


def test_an_undeclared_body_over_the_cap_stops_at_the_cap_and_leaves_nothing(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    cap = 1024 * 1024
    file_server.routes["/endless"] = Route(body=b"y" * CHUNK, send_length=False, repeat=1000)
    limits = DownloadLimits(per_file=cap, chunk_size=CHUNK)
    with pytest.raises(AttachmentTooLarge) as caught:
        download(session, file_server.url("/endless"), tmp_path, name="endless.bin", limits=limits)
    assert (caught.value.limit, caught.value.size) == (cap, cap + 1)
    assert _files_in(tmp_path) == []
    # the server sent 62.5 MB only if the client kept reading; it stopped at the cap
    assert file_server.sent.get("/endless", 0) <= cap + CHUNK + KERNEL_SLACK


def test_a_body_cut_short_fails_retryably_and_leaves_nothing(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/cut"] = Route(body=b"z" * CHUNK, repeat=2, declared_length=1_000_000)
    with pytest.raises(AttachmentFailed) as caught:
        download(session, file_server.url("/cut"), tmp_path, name="cut.bin")
    assert caught.value.retryable and "cut.bin" in str(caught.value)
    assert _files_in(tmp_path) == []


def test_the_message_budget_caps_files_together_and_returns_refused_bytes(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/a"] = Route(body=b"a" * 600_000, send_length=False)
    file_server.routes["/b"] = Route(body=b"b" * 600_000, send_length=False)
    file_server.routes["/c"] = Route(body=b"c" * 300_000)
    budget = MessageBudget(1_000_000)
    limits = DownloadLimits(per_file=800_000, per_message=1_000_000)
    first = download(
        session, file_server.url("/a"), tmp_path, name="a", limits=limits, budget=budget
    )
    with pytest.raises(AttachmentTooLarge) as caught:
        download(session, file_server.url("/b"), tmp_path, name="b", limits=limits, budget=budget)
    assert caught.value.which == "per_message" and caught.value.limit == 1_000_000
    assert budget.remaining == 400_000
    third = download(
        session, file_server.url("/c"), tmp_path, name="c", limits=limits, budget=budget
    )
    assert _files_in(tmp_path) == sorted([first.path.name, third.path.name])


def test_a_redirect_to_another_host_is_refused(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/go"] = Route(redirect=file_server.url("/img", host="localhost"))
    file_server.routes["/img"] = Route(body=_png())
    with pytest.raises(AttachmentRefused) as caught:
        download(
            session,
            file_server.url("/go"),
            tmp_path,
            name="p.png",
            headers={"Authorization": "Bearer t"},
        )
    assert "localhost" in str(caught.value) and "p.png" in str(caught.value)
    assert [host for host, _ in file_server.requests] == [f"127.0.0.1:{file_server.port}"]
    assert _files_in(tmp_path) == []


def test_a_redirect_to_an_allowed_host_is_followed_without_the_credentials(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    body = _png()
    file_server.routes["/go"] = Route(redirect=file_server.url("/img", host="localhost"))
    file_server.routes["/img"] = Route(body=body)
    got = download(
        session,
        file_server.url("/go"),
        tmp_path,
        name="p.png",
        headers={"Authorization": "Bearer t"},
        allowed_redirect_hosts=["localhost"],
    )
    assert got.sha256 == hashlib.sha256(body).hexdigest()
    (_, first), (second_host, second) = file_server.requests
    assert first["Authorization"] == "Bearer t"
    assert second_host == f"localhost:{file_server.port}" and "Authorization" not in second


def test_every_hop_of_a_redirect_chain_is_checked(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/one"] = Route(redirect=file_server.url("/two", host="localhost"))
    file_server.routes["/two"] = Route(redirect="http://example.invalid/x")
    with pytest.raises(AttachmentRefused, match="example.invalid"):
        download(
            session,
            file_server.url("/one"),
            tmp_path,
            name="x",
            allowed_redirect_hosts=["localhost"],
        )


def test_an_error_status_fails_visibly_and_says_whether_to_retry(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/busy"] = Route(status=503, body=b"later")
    with pytest.raises(AttachmentFailed) as caught:
        download(session, file_server.url("/busy"), tmp_path, name="f.txt")
    assert (caught.value.status, caught.value.retryable) == (503, True)
    with pytest.raises(AttachmentFailed) as missing:
        download(session, file_server.url("/nothing"), tmp_path, name="f.txt")
    assert (missing.value.status, missing.value.retryable) == (404, False)
    assert _files_in(tmp_path) == []


def test_a_lying_content_type_is_sniffed_from_the_bytes(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/pdf"] = Route(body=b"%PDF-1.7\n...", content_type="image/png")
    file_server.routes["/txt"] = Route(body="héllo\n".encode(), content_type="image/jpeg")
    assert (
        download(session, file_server.url("/pdf"), tmp_path, name="a.png").content_type
        == "application/pdf"
    )
    assert download(session, file_server.url("/txt"), tmp_path, name="b").content_type.startswith(
        "text/plain"
    )


def test_names_are_sanitized_and_made_unique(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/f"] = Route(body=b"hello")
    first = download(session, file_server.url("/f"), tmp_path, name="../../etc/.passwd")
    second = download(session, file_server.url("/f"), tmp_path, name="passwd")
    assert first.name == second.name == "passwd"
    assert first.path == tmp_path / "passwd"
    assert second.path.parent == tmp_path and second.path.name.startswith("passwd-")
    assert first.path.read_bytes() == second.path.read_bytes() == b"hello"


def test_a_stalled_server_times_out_on_the_read(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    # the server sends the headers, then waits for the client to hang up
    file_server.routes["/stall"] = Route(body=b"late", wait_for_close=True)
    limits = DownloadLimits(read_timeout=0.3)
    with pytest.raises(AttachmentFailed, match="timed out") as caught:
        download(session, file_server.url("/stall"), tmp_path, name="slow.txt", limits=limits)
    assert caught.value.retryable
    assert _files_in(tmp_path) == []


def test_a_redirect_loop_or_another_scheme_is_refused(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/loop"] = Route(redirect="/loop")
    file_server.routes["/ftp"] = Route(redirect="ftp://127.0.0.1/x")
    limits = DownloadLimits(max_redirects=2)
    with pytest.raises(AttachmentRefused, match="more than 2 redirects"):
        download(
            session,
            file_server.url("/loop"),
            tmp_path,
            name="x",
            allowed_redirect_hosts=["127.0.0.1"],
            limits=limits,
        )
    assert len(file_server.requests) == 3
    with pytest.raises(AttachmentRefused, match="ftp"):
        download(
            session,
            file_server.url("/ftp"),
            tmp_path,
            name="x",
            allowed_redirect_hosts=["127.0.0.1"],
        )
    assert _files_in(tmp_path) == []


def test_a_file_that_cannot_be_written_fails_visibly(
    file_server: FileServer, session: requests.Session, tmp_path: Path
) -> None:
    file_server.routes["/f"] = Route(body=b"hello")
    with pytest.raises(AttachmentFailed, match="could not be written") as caught:
        download(session, file_server.url("/f"), tmp_path / "gone", name="note.txt")
    assert caught.value.name == "note.txt" and not caught.value.retryable
