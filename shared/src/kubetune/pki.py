"""Certificates: a CA and the leaves it signs (servers, clients), as PEM files.

One helper for every certificate kubetune and its test cluster make: the webhook's serving
certificate (``webhook certs``), the local control plane's and the real node's (CN is the
user name, O the groups, as Kubernetes reads a client certificate) and the node agent's
kubelet port. Keys are P-256: Go's TLS accepts them and they are made in microseconds.
Files are written atomically (temp file and rename), so a reloading server never reads
half a file.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @classmethod
    def load(cls, cert_pem: bytes, key_pem: bytes) -> KeyPair:
        """Read a pair this module wrote (an EC key)."""
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the key must be an EC (P-256) key made by kubetune")
        return cls(x509.load_pem_x509_certificate(cert_pem), key)

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """``<stem>.crt`` and ``<stem>.key`` (0600), key first: a reader that sees the new
        key with the old certificate fails to load and retries."""
        directory.mkdir(parents=True, exist_ok=True)
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        write_atomic(key, self.key_pem, 0o600)
        write_atomic(crt, self.cert_pem)
        return crt, key


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _name(cn: str, orgs: Sequence[str]) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _usage(*, ca: bool) -> x509.KeyUsage:
    """Leaves sign (TLS handshakes); a CA signs certificates too."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,  # EC keys sign; they never encipher a session key
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _builder(
    subject: x509.Name, key: ec.EllipticCurvePrivateKey, days: float
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def make_ca(cn: str, orgs: Sequence[str] = (), days: float = 3650) -> KeyPair:
    """A self-signed CA that signs leaves only."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(cn, orgs)
    cert = (
        _builder(name, key, days)
        .issuer_name(name)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def issue(
    ca: KeyPair | None,
    cn: str,
    orgs: Sequence[str] = (),
    *,
    server: bool = False,
    client: bool = False,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    days: float = 365,
) -> KeyPair:
    """A leaf signed by ``ca`` (``None``: by itself) for a server, a client or both.

    A server needs at least one DNS name or address: clients check those, not the CN.
    """
    if server and not dns and not ips:
        raise ValueError("a server certificate needs at least one DNS name or IP address")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(cn, orgs)
    builder = (
        _builder(subject, key, days)
        .issuer_name(ca.cert.subject if ca else subject)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(ca=False), critical=True)
    )
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if ca:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    if dns or ips:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return KeyPair(builder.sign(ca.key if ca else key, hashes.SHA256()), key)
