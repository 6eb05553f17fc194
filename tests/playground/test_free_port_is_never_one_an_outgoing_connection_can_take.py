"""`free_port()` picks a port that no outgoing connection can take before it is bound.

A test (or a script) picks a port, then starts a server on it seconds later. A port the
OS picked (``bind(0)``) lies in its ephemeral range, which it also hands to outgoing
connections: with thousands of loopback connections in flight, one took such a port and
the server failed with "Address already in use" (a CI failure of the quickstart runner).
`free_port()` now picks below that range (Linux's ``ip_local_port_range``), where only
another program choosing the same number could take it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from channelkit.playground import free_port
from channelkit.playground import server as server_module

linux_only = pytest.mark.skipif(
    server_module._ephemeral_port_floor() is None,
    reason="the OS does not say its ephemeral port range (Linux's ip_local_port_range)",
)


@linux_only
def test_ports_are_chosen_below_the_ephemeral_range_and_are_free() -> None:
    floor = server_module._ephemeral_port_floor()
    assert floor is not None
    ports = {free_port() for _ in range(40)}
    assert all(server_module._LOWEST_CHOSEN_PORT <= p < floor for p in ports), sorted(ports)
    assert len(ports) > 1  # not one fixed number shared by every caller
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: the server can bind it


@linux_only
def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    busy, other = free_port(), free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", busy))
        holder.listen()
        picks = iter([busy, busy, other])
        monkeypatch.setattr(server_module._random, "randrange", lambda *_: next(picks))
        assert free_port() == other


def test_without_a_known_range_the_os_picks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "ip_local_port_range"
    assert server_module._ephemeral_port_floor(missing) is None
    missing.write_text("not numbers\n")
    assert server_module._ephemeral_port_floor(missing) is None
    missing.write_text("32768\t60999\n")
    assert server_module._ephemeral_port_floor(missing) == 32768

    monkeypatch.setattr(server_module, "_ephemeral_port_floor", lambda: None)
    monkeypatch.setattr(
        server_module._random, "randrange", lambda *_: pytest.fail("no range: nothing chosen")
    )
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # the OS's pick, free
