"""Per-run PKI for the local control plane.

Certificates are minted fresh for every ``up`` (they are short-lived, like envtest's),
so nothing secret is cached between runs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kubetune import pki
from kubetune.pki import KeyPair

VALIDITY_DAYS = 7
ORG = ("kubetune-localcluster",)
make_ca = functools.partial(pki.make_ca, orgs=ORG, days=VALIDITY_DAYS)
issue = functools.partial(pki.issue, days=VALIDITY_DAYS)
__all__ = ["KeyPair", "Pki", "generate", "issue", "make_ca"]


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
    # The service-account signing key (not a certificate): RSA, as kube-apiserver expects.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
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
