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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubetune import pki

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


def make_ca(common_name: str = "kubetune-webhook-ca", days: float = 3650) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a self-signed CA."""
    ca = pki.make_ca(common_name, days=days)
    return ca.cert_pem, ca.key_pem


def make_serving(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    dns_names: Sequence[str],
    ips: Sequence[str],
    days: float = 365,
) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for a server answering on these names and addresses."""
    if not dns_names and not ips:
        raise ValueError("give at least one DNS name or IP address")
    try:
        ca = pki.KeyPair.load(ca_cert_pem, ca_key_pem)
    except ValueError:
        raise ValueError("the CA key must be an EC key made by `webhook certs`") from None
    # A CN holds 64 characters at most (a long namespace's Service name does not fit); clients
    # check the SANs, the CN only names the certificate.
    common = (dns_names[0] if dns_names else ips[0])[:64]
    leaf = pki.issue(ca, common, server=True, dns=dns_names, ips=ips, days=days)
    return leaf.cert_pem, leaf.key_pem


write_atomic = pki.write_atomic


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
