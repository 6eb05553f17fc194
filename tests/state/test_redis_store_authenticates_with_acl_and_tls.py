"""The Redis store's security options against real redis-servers on 127.0.0.1.

ACL: a server whose only user is ``alice`` (the default user off). The store with her
username and password works; a wrong password fails when the process starts, with an
error naming ``state.redis.password`` and never the password itself. TLS: a server that
speaks only TLS (``--port 0 --tls-port``) and asks for client certificates, with a CA,
a server and a client certificate made here by ``cryptography``: the store with
``tls``, the CA file and the client certificate works; without the client certificate
it cannot connect. The options are checked field by field before any connection.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

redis = pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.config import build_state_store, check_state, parse_config  # noqa: E402
from channelkit.errors import ConfigurationError, StateStoreUnavailable  # noqa: E402
from channelkit.state import RedisStore  # noqa: E402

HOST = "127.0.0.1"
PASSWORD = "pw-" + uuid.uuid4().hex
CHANNEL = {"platform": "telegram", "name": "helpdesk", "credentials": {"botToken": "1:abc"}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], Any], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)  # polling a starting process, not waiting for a timer


@pytest.fixture(scope="module")
def executable() -> str:
    found = shutil.which("redis-server")
    if found is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return found


def start(executable: str, args: list[str], client: Any) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [executable, "--bind", HOST, "--save", "", "--appendonly", "no", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: process.poll() is None and client.ping(), 10, "redis-server")
    except AssertionError:
        process.kill()
        process.wait(10)
        raise
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait(10)


def document(redis_section: dict[str, Any]) -> dict[str, Any]:
    return {
        "channels": [CHANNEL],
        "agent": {"type": "demo"},
        "state": {"redis": redis_section},
    }


# -- ACL ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def acl_port(executable: str) -> Iterator[int]:
    port = free_port()
    rules = ["on", f">{PASSWORD}", "~*", "&*", "+@all"]
    client = redis.Redis(host=HOST, port=port, username="alice", password=PASSWORD)
    process = start(
        executable,
        ["--port", str(port), "--user", "alice", *rules, "--user", "default", "off"],
        client,
    )
    try:
        yield port
    finally:
        stop(process)


def test_the_right_username_and_password_reach_an_acl_server(acl_port: int) -> None:
    store = RedisStore(
        f"redis://{HOST}:{acl_port}/0",
        username="alice",
        password=PASSWORD,
        namespace=f"acl-{uuid.uuid4().hex[:8]}",
    )
    try:
        store.put("k", {"v": 1})
        assert store.get("k") == {"v": 1}
        assert PASSWORD not in repr(store)
    finally:
        store.close()


def test_a_wrong_password_refuses_to_start_naming_the_password_field(acl_port: int) -> None:
    url = f"redis://{HOST}:{acl_port}/0"
    config = parse_config(
        document({"url": url, "username": "alice", "password": {"env": "CK_TEST_REDIS_PW"}}),
        environ={"CK_TEST_REDIS_PW": "wrong-" + PASSWORD},
    )
    with pytest.raises(ConfigurationError) as caught:
        check_state(config)
    assert caught.value.path == "state.redis.password"
    assert "credentials" in str(caught.value)
    assert PASSWORD not in str(caught.value)

    store = RedisStore(url, username="alice", password="wrong-" + PASSWORD)
    try:
        with pytest.raises(StateStoreUnavailable) as refused:
            store.get("k")
        assert refused.value.cause_class == "AuthenticationError"
        assert "wrong-" not in str(refused.value)
    finally:
        store.close()


def test_a_configured_acl_user_starts_and_serves_the_store(acl_port: int) -> None:
    config = parse_config(
        document(
            {
                "url": f"redis://{HOST}:{acl_port}/0",
                "username": "alice",
                "password": {"env": "CK_TEST_REDIS_PW"},
            }
        ),
        environ={"CK_TEST_REDIS_PW": PASSWORD},
    )
    check_state(config)  # starts
    store = build_state_store(config)
    try:
        store.put("who", {"v": "alice"})  # the default user is off: only alice can write
        assert store.get("who") == {"v": "alice"}
    finally:
        store.close()


# -- TLS ----------------------------------------------------------------------------------


def _write_certificates(directory: Path) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files,
    RFC 5280-conformant (key usage, key identifiers) as Python 3.13's default strict
    verification demands."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def save(stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        (directory / f"{stem}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("test ca"))
        .issuer_name(name("test ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    save("ca", ca_key, ca)
    for stem, usage in (
        ("server", ExtendedKeyUsageOID.SERVER_AUTH),
        ("client", ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(stem))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            # what Python 3.13's strict X.509 verification requires of a leaf
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address(HOST)), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        )
        save(stem, key, builder.sign(ca_key, hashes.SHA256()))
    return {stem: str(directory / stem) for stem in ("ca", "server", "client")}


@pytest.fixture(scope="module")
def tls_server(
    executable: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, dict[str, str]]]:
    pytest.importorskip("cryptography", reason="cryptography is needed to make certificates")
    files = _write_certificates(tmp_path_factory.mktemp("tls"))
    port = free_port()
    client = redis.Redis(
        host=HOST,
        port=port,
        ssl=True,
        ssl_ca_certs=files["ca"] + ".crt",
        ssl_certfile=files["client"] + ".crt",
        ssl_keyfile=files["client"] + ".key",
    )
    process = start(
        executable,
        [
            "--port", "0",
            "--tls-port", str(port),
            "--tls-cert-file", files["server"] + ".crt",
            "--tls-key-file", files["server"] + ".key",
            "--tls-ca-cert-file", files["ca"] + ".crt",
        ],
        client,
    )  # fmt: skip
    try:
        yield port, files
    finally:
        stop(process)


def test_a_tls_only_server_is_reached_with_the_ca_and_a_client_certificate(
    tls_server: tuple[int, dict[str, str]],
) -> None:
    port, files = tls_server
    config = parse_config(
        document(
            {
                "url": f"redis://{HOST}:{port}/0",
                "tls": True,
                "tlsCaFile": files["ca"] + ".crt",
                "tlsCertFile": files["client"] + ".crt",
                "tlsKeyFile": files["client"] + ".key",
            }
        ),
        environ={},
    )
    check_state(config)
    store = build_state_store(config)
    try:
        assert isinstance(store, RedisStore) and store.tls is True
        store.put("k", {"v": "tls"})
        assert store.get("k") == {"v": "tls"}
    finally:
        store.close()

    rediss = RedisStore(f"rediss://{HOST}:{port}/0", tls_ca_file=files["ca"] + ".crt")
    try:  # the server asks for a client certificate: without one, no connection
        with pytest.raises(StateStoreUnavailable):
            rediss.ping()
    finally:
        rediss.close()


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"url": "redis://h", "tlsCaFile": __file__}, "state.redis.tlsCaFile"),
        ({"url": "redis://h", "tls": True, "tlsCaFile": "/no/such.pem"}, "state.redis.tlsCaFile"),
        ({"url": "redis://h", "tls": True, "tlsCertFile": __file__}, "state.redis.tlsKeyFile"),
        ({"url": "redis://h", "tls": "yes"}, "state.redis.tls"),
        ({"url": "unix:///run/redis.sock", "tls": True}, "state.redis.tls"),
        ({"url": "redis://h", "password": ""}, "state.redis.password"),
        ({"url": "redis://h", "username": {"env": "CK_TEST_UNSET_USER"}}, "state.redis.username"),
        ({"sentinels": ["h:1"]}, "state.redis.sentinelService"),
        ({"sentinels": ["h"], "sentinelService": "svc"}, "state.redis.sentinels[0]"),
        ({"sentinels": [], "sentinelService": "svc"}, "state.redis.sentinels"),
        ({"url": "redis://h", "sentinelService": "svc"}, "state.redis.sentinelService"),
        ({"url": "redis://h", "sentinelPassword": "x"}, "state.redis.sentinelPassword"),
        ({"sentinelService": "svc"}, "state.redis.url"),
    ],
)  # fmt: skip
def test_bad_security_and_sentinel_options_name_their_field(
    section: dict[str, Any], path: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_config(document(section), environ={})
    assert caught.value.path is not None
    assert caught.value.path.startswith(path), (caught.value.path, str(caught.value))


def test_a_sentinel_section_builds_a_store_following_the_named_primary() -> None:
    config = parse_config(
        document(
            {
                "sentinels": ["127.0.0.1:26379", "[::1]:26380"],
                "sentinelService": "svc",
                "sentinelPassword": {"env": "CK_TEST_SENTINEL_PW"},
                "password": "primary-secret",
            }
        ),
        environ={"CK_TEST_SENTINEL_PW": "sentinel-secret"},
    )
    store = build_state_store(config)
    try:
        assert isinstance(store, RedisStore)
        assert store.sentinels == ("127.0.0.1:26379", "::1:26380")
        assert store.sentinel_service == "svc"
        assert "secret" not in repr(store)
        assert "secret" not in repr(config)
    finally:
        store.close()
