"""`kubetune.tlsclient` against a real TLS server (the `ssl` module's, in a thread): it reads
and writes through the handshake, and refuses what `ssl.create_default_context` refuses."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetune import pki, tlsclient


def _serve(certificate: pki.KeyPair, directory: Path, answer: bytes) -> Iterator[int]:
    """A one-connection TLS server on 127.0.0.1 that reads one line and answers `answer`."""
    crt, key = certificate.write(directory, "server")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(crt, key)
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        raw, _ = listener.accept()
        try:
            with context.wrap_socket(raw, server_side=True) as conn:
                conn.makefile("rb").readline()
                conn.sendall(answer)
        except (OSError, ssl.SSLError):
            pass  # the client refused the certificate

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    listener.close()
    thread.join(5)


@pytest.fixture
def ca() -> pki.KeyPair:
    return pki.make_ca("tlsclient-test-ca")


def _client(tmp_path: Path, ca: pki.KeyPair) -> tlsclient.Context:
    path = tmp_path / "client-ca.crt"
    path.write_bytes(ca.cert_pem)
    return tlsclient.Context(str(path))


def test_a_verified_connection_writes_and_reads_lines_and_chunks(
    tmp_path: Path, ca: pki.KeyPair
) -> None:
    server = pki.issue(ca, "server", server=True, ips=("127.0.0.1",))
    body = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    for port in _serve(server, tmp_path, body):
        stream = _client(tmp_path, ca).connect("127.0.0.1", port, timeout=5)
        stream.sendall(b"GET / HTTP/1.1\r\n")
        assert stream.readline(100) == b"HTTP/1.1 200 OK\r\n"
        assert stream.readline(100) == b"Content-Length: 5\r\n"
        assert stream.readline(100) == b"\r\n"
        assert stream.read1(3) == b"hel" and stream.read1(100) == b"lo"
        assert stream.read1(100) == b""  # the server closed: the end
        stream.close()


def test_a_line_longer_than_the_limit_is_cut_at_the_limit(tmp_path: Path, ca: pki.KeyPair) -> None:
    server = pki.issue(ca, "server", server=True, ips=("127.0.0.1",))
    for port in _serve(server, tmp_path, b"x" * 50 + b"\n"):
        stream = _client(tmp_path, ca).connect("127.0.0.1", port, timeout=5)
        stream.sendall(b"\n")
        assert stream.readline(20) == b"x" * 20
        stream.close()


def test_a_server_signed_by_another_ca_is_refused(tmp_path: Path, ca: pki.KeyPair) -> None:
    stranger = pki.issue(pki.make_ca("other-ca"), "server", server=True, ips=("127.0.0.1",))
    for port in _serve(stranger, tmp_path, b""):
        with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
            _client(tmp_path, ca).connect("127.0.0.1", port, timeout=5)


def test_a_certificate_for_another_name_is_refused(tmp_path: Path, ca: pki.KeyPair) -> None:
    """Signed by the trusted CA, but not for the address connected to."""
    elsewhere = pki.issue(ca, "server", server=True, dns=("elsewhere.example",))
    for port in _serve(elsewhere, tmp_path, b""):
        with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
            _client(tmp_path, ca).connect("127.0.0.1", port, timeout=5)


def test_nothing_listening_is_an_os_error(tmp_path: Path, ca: pki.KeyPair) -> None:
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    with pytest.raises(ConnectionRefusedError):
        _client(tmp_path, ca).connect("127.0.0.1", port, timeout=5)
