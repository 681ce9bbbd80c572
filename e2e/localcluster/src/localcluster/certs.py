"""Per-run PKI for the local control plane.

Certificates are minted fresh for every ``up`` (they are short-lived, like envtest's),
so nothing secret is cached between runs.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=7)


@dataclass
class KeyPair:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes
    cert: x509.Certificate
    key: rsa.RSAPrivateKey

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        crt.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return crt, key


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pair(cert: x509.Certificate, key: rsa.RSAPrivateKey) -> KeyPair:
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem, cert, key)


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def make_ca(cn: str) -> KeyPair:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    name = _name(cn, ("kubetune-localcluster",))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _pair(cert, key)


def issue(
    ca: KeyPair,
    cn: str,
    orgs: tuple[str, ...] = (),
    *,
    server: bool = False,
    client: bool = False,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> KeyPair:
    """Sign a leaf certificate with ``ca``: CN is the user name, O the groups."""
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, orgs))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=True,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
    )
    if dns or ips:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return _pair(builder.sign(ca.key, hashes.SHA256()), key)


@dataclass
class Pki:
    """Paths of every PEM file the control plane needs."""

    directory: Path

    def p(self, name: str) -> Path:
        return self.directory / name


SERVING_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def generate(directory: Path, service_ip: str, node: tuple[str, str] | None = None) -> Pki:
    """Write serving CA+cert, client CA, client certs, and the SA signing key to ``directory``.

    Files: ca.crt (serving CA), apiserver.crt/.key, client-ca.crt/.key, sa.key/sa.pub,
    and <user>.crt/.key for admin, controller-manager, scheduler, apiserver-kubelet-client.
    With ``node`` (name, address) of a real node also: the API server serves on that
    address too; kubelet-client (the node's identity, system:node:<name> in system:nodes),
    kubelet-serving (its HTTPS port) and kube-proxy (system:kube-proxy).
    """
    directory.mkdir(parents=True, exist_ok=True)
    serving_ca = make_ca("localcluster-serving-ca")
    serving_ca.write(directory, "ca")
    ips = ("127.0.0.1", service_ip, *((node[1],) if node else ()))
    issue(serving_ca, "kube-apiserver", server=True, dns=SERVING_DNS, ips=ips).write(
        directory, "apiserver"
    )
    if node:
        name, address = node
        issue(serving_ca, name, server=True, dns=(name,), ips=(address,)).write(
            directory, "kubelet-serving"
        )
    client_ca = make_ca("localcluster-client-ca")
    client_ca.write(directory, "client-ca")
    users = {
        "admin": ("localcluster-admin", ("system:masters",)),
        # KCM runs with --use-service-account-credentials=false, so it needs broad rights.
        "controller-manager": ("system:kube-controller-manager", ("system:masters",)),
        "scheduler": ("system:kube-scheduler", ()),
        "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ("system:masters",)),
    }
    if node:
        users["kubelet-client"] = (f"system:node:{node[0]}", ("system:nodes",))
        users["kube-proxy"] = ("system:kube-proxy", ())
    for stem, (cn, orgs) in users.items():
        issue(client_ca, cn, orgs, client=True).write(directory, stem)
    sa_key = _key()
    (directory / "sa.key").write_bytes(
        sa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    (directory / "sa.key").chmod(0o600)
    (directory / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(directory)
