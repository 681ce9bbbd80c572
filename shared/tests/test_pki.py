"""kubetune.pki: the certificates it makes verify the way TLS peers and Kubernetes read them."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from kubetune import pki


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, host: str) -> str:
    """One TLS handshake over a socket pair; returns the client's view of the server CN."""
    a, b = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(a, server_side=True) as s:
                s.recv(1)
        except (OSError, ssl.SSLError) as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(b, server_hostname=host) as c:
            cert = c.getpeercert()
            c.send(b"x")
    finally:
        thread.join(5)
    subject = dict(x[0] for x in cert["subject"]) if cert else {}
    return str(subject.get("commonName", ""))


def test_a_server_certificate_verifies_against_its_ca_for_its_names(tmp_path: Path) -> None:
    ca = pki.make_ca("test-ca")
    crt, key = pki.issue(ca, "web", server=True, dns=("web.local",), ips=("127.0.0.1",)).write(
        tmp_path, "web"
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(crt), str(key))
    client = ssl.create_default_context(cadata=ca.cert_pem.decode())
    assert _handshake(server, client, "web.local") == "web"
    other = ssl.create_default_context(cadata=pki.make_ca("another-ca").cert_pem.decode())
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, other, "web.local")


def test_a_client_certificate_names_the_user_and_groups() -> None:
    ca = pki.make_ca("clients")
    leaf = pki.issue(ca, "system:node:n1", ("system:nodes",), client=True)
    assert leaf.cert.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes"
    assert leaf.cert.issuer == ca.cert.subject
    usage = leaf.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_written_pairs_load_back_and_the_key_is_private(tmp_path: Path) -> None:
    ca = pki.make_ca("ca")
    crt, key = ca.write(tmp_path, "ca")
    assert key.stat().st_mode & 0o777 == 0o600
    again = pki.KeyPair.load(crt.read_bytes(), key.read_bytes())
    assert again.cert == ca.cert and again.key_pem == ca.key_pem


def test_self_signed_and_bad_input() -> None:
    own = pki.issue(None, "node", server=True, ips=("10.0.0.1",))
    assert own.cert.issuer == own.cert.subject
    with pytest.raises(ValueError, match="at least one DNS name or IP address"):
        pki.issue(pki.make_ca("ca"), "nameless", server=True)
