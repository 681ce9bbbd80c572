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


def issue(out_dir: Path, dns_names: Sequence[str], ips: Sequence[str], days: int = 365) -> Files:
    """Write `ca.crt`/`ca.key` (reused when present) and a new `tls.crt`/`tls.key`."""
    if not dns_names and not ips:
        raise ValueError("give at least one DNS name or IP address")
    files = Files(out_dir / CA_CERT, out_dir / CA_KEY, out_dir / TLS_CERT, out_dir / TLS_KEY)
    if files.ca_cert.exists() and files.ca_key.exists():
        ca = pki.KeyPair.load(files.ca_cert.read_bytes(), files.ca_key.read_bytes())
    else:
        ca = pki.make_ca("kubetune-webhook-ca")
        ca.write(out_dir, "ca")
    cn = dns_names[0] if dns_names else ips[0]
    pki.issue(ca, cn, server=True, dns=dns_names, ips=ips, days=days).write(out_dir, "tls")
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
