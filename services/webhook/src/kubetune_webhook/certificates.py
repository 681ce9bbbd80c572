"""`webhook certs`: a CA and a serving certificate, and the caBundle in the webhook configurations.

Why: the API server calls the webhook over TLS and trusts only the `caBundle` of the webhook
configuration. Without cert-manager (the local cluster, kind) this subcommand makes both: a CA
(kept and reused when its files exist, so re-issuing the serving certificate does not change the
caBundle), a serving certificate for the given DNS names and IPs, written atomically (temp file
and rename, so the server's reloader never reads half a file), and optionally the caBundle
patched into named Mutating/ValidatingWebhookConfigurations.
"""

from __future__ import annotations

import base64
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

# The configurations `webhook certs --patch` fills the caBundle of (re-exported for main).
from kubetune.kube import (
    MUTATING_WEBHOOK_CONFIGURATIONS as MUTATING_WEBHOOK_CONFIGURATIONS,
)
from kubetune.kube import (
    VALIDATING_WEBHOOK_CONFIGURATIONS as VALIDATING_WEBHOOK_CONFIGURATIONS,
)
from kubetune.kube import Kube, Resource

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"


@dataclass(frozen=True)
class Files:
    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256: the API server (Go) accepts it and handshakes are cheaper than with RSA.
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def make_ca(common_name: str = "kubetune-webhook-ca", days: int = 3650) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a self-signed CA."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def make_serving(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    dns_names: Sequence[str],
    ips: Sequence[str],
    days: int = 365,
) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for a server answering on these names and addresses."""
    if not dns_names and not ips:
        raise ValueError("give at least one DNS name or IP address")
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key made by `webhook certs`")
    key = _key()
    # A CN holds 64 characters at most (a long namespace's Service name does not fit); clients
    # check the SANs, the CN only names the certificate.
    common = (dns_names[0] if dns_names else ips[0])[:64]
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def issue(out_dir: Path, dns_names: Sequence[str], ips: Sequence[str], days: int = 365) -> Files:
    """Write `ca.crt`/`ca.key` (reused when present) and a new `tls.crt`/`tls.key`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = Files(out_dir / CA_CERT, out_dir / CA_KEY, out_dir / TLS_CERT, out_dir / TLS_KEY)
    if files.ca_cert.exists() and files.ca_key.exists():
        ca_cert, ca_key = files.ca_cert.read_bytes(), files.ca_key.read_bytes()
    else:
        ca_cert, ca_key = make_ca()
        write_atomic(files.ca_key, ca_key, 0o600)
        write_atomic(files.ca_cert, ca_cert)
    cert, key = make_serving(ca_cert, ca_key, dns_names, ips, days)
    # Key first: a reader that sees the new key with the old cert fails to load and retries.
    write_atomic(files.key, key, 0o600)
    write_atomic(files.cert, cert)
    return files


def patch_ca_bundle(kube: Kube, resource: Resource, name: str, ca_pem: bytes) -> int:
    """Set `clientConfig.caBundle` of every webhook of the configuration; returns how many."""
    current = kube.get(resource, name)
    bundle = base64.b64encode(ca_pem).decode()
    ops = [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i in range(len(current.get("webhooks") or []))
    ]
    if ops:
        kube.patch(resource, name, ops, patch_type="json")
    return len(ops)
