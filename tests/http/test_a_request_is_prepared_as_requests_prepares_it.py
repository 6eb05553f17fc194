"""The transport's sessions prepare a request exactly as ``requests`` does, only cheaper.

``requests.Session.prepare_request`` merges headers, params, cookies and hooks through
generic helpers and looks for a netrc file on every call; the sessions `make_session`
builds prepare the common request (no cookies, no auth, no session params) directly and
read the netrc file once per host. What goes on the wire must not change: the method, the
URL with its query, every header (a header set to None is left out, a session header is
kept or overridden) and the body; a request with cookies or netrc credentials gets them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.http.transport import make_session

URL = "http://127.0.0.1:9/v1.0/card/instances"


def wire(prepared: requests.PreparedRequest) -> tuple[Any, ...]:
    """What a prepared request sends: method, URL, headers (in order) and body."""
    return (prepared.method, prepared.url, list(prepared.headers.items()), prepared.body)


CASES: list[dict[str, Any]] = [
    {"method": "put", "headers": {"x-acs-dingtalk-access-token": "t"}, "json": {"a": 1}},
    {"method": "POST", "json": {"text": "héllo", "n": [1, 2]}, "params": {}},
    {"method": "GET", "params": {"offset": "5", "skip": None, "q": "a b&c"}},
    {"method": "POST", "data": {"grant_type": "client_credentials", "scope": "x y"}},
    # a None header drops a session default; another overrides it
    {"method": "GET", "headers": {"Accept-Encoding": None, "User-Agent": "ck-test/1"}},
    {"method": "DELETE", "headers": {"Content-Type": "application/json"}, "json": None},
]


@pytest.mark.parametrize("case", CASES)
def test_the_wire_is_what_requests_would_send(case: dict[str, Any]) -> None:
    session = make_session(2)
    ours = session.prepare_request(requests.Request(url=URL, **case))
    theirs = requests.Session.prepare_request(session, requests.Request(url=URL, **case))
    assert wire(ours) == wire(theirs)
    assert "Cookie" not in ours.headers and "Authorization" not in ours.headers


def test_session_cookies_and_request_cookies_still_go_out() -> None:
    session = make_session(2)
    session.cookies.set("lb", "node-3", domain="127.0.0.1", path="/")
    request = requests.Request("GET", URL, cookies={"k": "v"})
    ours = session.prepare_request(request)
    assert wire(ours) == wire(requests.Session.prepare_request(session, request))
    assert "lb=node-3" in ours.headers["Cookie"] and "k=v" in ours.headers["Cookie"]


def test_netrc_credentials_are_sent_and_a_host_without_any_is_looked_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login robot password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    reads: list[str] = []
    real = requests.utils.get_netrc_auth

    def counting(url: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(url)
        return real(url, *args, **kwargs)

    monkeypatch.setattr(requests.utils, "get_netrc_auth", counting)
    monkeypatch.setattr(requests.sessions, "get_netrc_auth", counting)
    session = make_session(2)
    request = requests.Request("GET", URL)
    ours = session.prepare_request(request)
    assert ours.headers["Authorization"].startswith("Basic ")
    assert wire(ours) == wire(requests.Session.prepare_request(session, request))
    reads.clear()
    for i in range(5):
        other = session.prepare_request(requests.Request("GET", f"http://localhost:9/x?i={i}"))
        assert "Authorization" not in other.headers  # no entry for that host
    assert reads == ["http://localhost:9/x?i=0"]  # read at the host's first request only
