"""`kubetune.runtime.serving`: the probe server bounds its connections and their time."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest

from kubetune.runtime import serving


@pytest.fixture
def small_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[serving.ProbeServer]:
    monkeypatch.setattr(serving, "MAX_CONNECTIONS", 2)
    monkeypatch.setattr(serving, "TIMEOUT", 1.0)
    server = serving.serve_probes("127.0.0.1", 0, healthy=lambda: True, ready=lambda: True)
    yield server
    server.shutdown()
    server.server_close()


def _healthz(server: serving.ProbeServer) -> bytes:
    port = server.server_address[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
        return bytes(answer.read())


def _silent(server: serving.ProbeServer) -> socket.socket:
    """A connection that never sends its request."""
    host, port = server.server_address[:2]
    return socket.create_connection((str(host), int(port)), timeout=10)


def test_connections_past_the_cap_are_closed_unanswered(small_server: serving.ProbeServer) -> None:
    held = [_silent(small_server) for _ in range(2)]
    time.sleep(0.2)  # both accepted and each holding its thread
    extra = _silent(small_server)
    extra.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    assert extra.recv(100) == b""  # closed, not answered
    extra.close()
    for sock in held:
        sock.close()
    time.sleep(0.2)
    assert _healthz(small_server) == b"ok"  # the slots came back


def test_a_silent_connection_is_closed_after_the_timeout(small_server: serving.ProbeServer) -> None:
    sock = _silent(small_server)
    started = time.monotonic()
    assert sock.recv(100) == b""  # closed by the server, not by our 10 s timeout
    assert time.monotonic() - started < 5
    sock.close()
    assert _healthz(small_server) == b"ok"
