"""The webhook's own certificate: a CA and a serving certificate kept in one Secret.

Why: without cert-manager, `kubectl apply -k` must be the whole install. So the webhook keeps a
CA and a serving certificate in the Secret the manifests ship (empty), renews both well before
they expire, and sets the CA as `caBundle` of its webhook configurations. The Secret is the
source of truth: one replica (the leader) writes it and the configurations, every replica serves
the pair the Secret holds (`syncing.py`).

Renewal: the serving certificate when less than `renew_before` of it is left, or when it was not
signed by the Secret's CA or does not name every DNS name/IP; the CA when a new serving
certificate would outlive it. A renewed CA is published next to the old one (`ca-previous.crt`)
and the caBundle is written before a certificate signed by the new CA is, so no replica ever
serves a certificate the API server does not trust yet.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from kubetune import errors
from kubetune.kube import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
    Obj,
    Resource,
)
from kubetune_webhook import certificates

log = logging.getLogger(__name__)

CA_PREVIOUS = "ca-previous.crt"
DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Plan:
    """What to provision: the Secret, the names the certificate must carry, the configurations
    whose caBundle to set, and the lifetimes."""

    namespace: str
    secret: str
    dns_names: tuple[str, ...]
    ips: tuple[str, ...] = ()
    mutating: tuple[str, ...] = ()
    validating: tuple[str, ...] = ()
    cert_days: int = 365
    ca_days: int = 3650
    renew_before: datetime.timedelta = field(default=90 * DAY)

    def configurations(self) -> list[tuple[Resource, str]]:
        return [(MUTATING_WEBHOOK_CONFIGURATIONS, n) for n in self.mutating] + [
            (VALIDATING_WEBHOOK_CONFIGURATIONS, n) for n in self.validating
        ]


@dataclass(frozen=True)
class Pair:
    """The serving certificate and key a Secret holds, and the CA bundle that trusts them."""

    cert: bytes
    key: bytes
    ca: bytes
    bundle: bytes


def decoded(secret: Obj | None) -> dict[str, bytes]:
    data = (secret or {}).get("data") or {}
    return {k: base64.b64decode(v) for k, v in data.items() if v}


def pair_of(secret: Obj | None) -> Pair | None:
    """The pair to serve from a Secret, or None while it holds none."""
    data = decoded(secret)
    cert, key, ca = (data.get(k) for k in ("tls.crt", "tls.key", "ca.crt"))
    if not cert or not key or not ca:
        return None
    return Pair(cert, key, ca, bundle_of(data))


def bundle_of(data: dict[str, bytes]) -> bytes:
    """The caBundle: the current CA, and the previous one while it has not expired."""
    bundle = data.get("ca.crt", b"")
    previous = data.get(CA_PREVIOUS)
    if previous and _valid_for(previous, datetime.timedelta(0)):
        bundle = bundle.rstrip(b"\n") + b"\n" + previous
    return bundle


def _load(pem: bytes) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _valid_for(pem: bytes, margin: datetime.timedelta) -> bool:
    cert = _load(pem)
    return cert is not None and cert.not_valid_after_utc - _now() > margin


def _ca_usable(data: dict[str, bytes], plan: Plan) -> bool:
    """The CA can sign a new serving certificate that expires before it does."""
    ca, key = data.get("ca.crt"), data.get("ca.key")
    if not ca or not key:
        return False
    try:
        serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError):
        return False
    return _valid_for(ca, plan.cert_days * DAY)


def _serving_ok(data: dict[str, bytes], plan: Plan) -> bool:
    """The serving certificate is signed by the CA, names everything, and is not due."""
    cert, ca = _load(data.get("tls.crt", b"")), _load(data.get("ca.crt", b""))
    if cert is None or ca is None or not data.get("tls.key"):
        return False
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    names = set(sans.get_values_for_type(x509.DNSName))
    ips = set(sans.get_values_for_type(x509.IPAddress))
    if not set(plan.dns_names) <= names or not {ipaddress.ip_address(i) for i in plan.ips} <= ips:
        return False
    return cert.not_valid_after_utc - _now() > plan.renew_before


def _encode(data: dict[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in sorted(data.items())}


class Rotator:
    """One pass at a time (`reconcile`), by the leader only: renew what is due in the Secret,
    then make every configuration's caBundle the Secret's bundle."""

    def __init__(self, kube: Kube, plan: Plan) -> None:
        self.kube = kube
        self.plan = plan

    def reconcile(self) -> Obj:
        """Returns the Secret as it is afterwards.

        Raises:
            errors.NotFound: the Secret or a configuration does not exist (the manifests create
                them; the webhook may not create Secrets).
            errors.Conflict: someone else wrote the Secret meanwhile; the next pass retries.
        """
        plan = self.plan
        secret = self.kube.get(SECRETS, plan.secret, plan.namespace)
        data = decoded(secret)
        if not _ca_usable(data, plan):
            ca_cert, ca_key = certificates.make_ca(days=plan.ca_days)
            if data.get("ca.crt") and _valid_for(data["ca.crt"], datetime.timedelta(0)):
                data[CA_PREVIOUS] = data["ca.crt"]
            data.update({"ca.crt": ca_cert, "ca.key": ca_key})
            secret = self._write(secret, data, "a new CA")
            # The new CA is trusted before anything it signs is served.
            self._publish(bundle_of(data))
        if not _serving_ok(data, plan):
            cert, key = certificates.make_serving(
                data["ca.crt"], data["ca.key"], plan.dns_names, plan.ips, plan.cert_days
            )
            data.update({"tls.crt": cert, "tls.key": key})
            secret = self._write(secret, data, "a new serving certificate")
        self._publish(bundle_of(data))
        return secret

    def _write(self, secret: Obj, data: dict[str, bytes], what: str) -> Obj:
        secret["data"] = _encode(data)
        written = self.kube.replace(SECRETS, secret, self.plan.namespace)
        log.info("wrote %s to Secret %s/%s", what, self.plan.namespace, self.plan.secret)
        return written

    def _publish(self, bundle: bytes) -> None:
        for resource, name in self.plan.configurations():
            if not published(self.kube, resource, name, bundle, exact=True):
                count = certificates.patch_ca_bundle(self.kube, resource, name, bundle)
                log.info("set caBundle of %d webhook(s) in %s %s", count, resource.kind, name)


def published(kube: Kube, resource: Resource, name: str, ca: bytes, *, exact: bool = False) -> bool:
    """Every webhook of the configuration trusts `ca` (with `exact`: its caBundle is `ca`)."""
    config = kube.get(resource, name)
    hooks: Sequence[Obj] = config.get("webhooks") or []
    for hook in hooks:
        bundle = base64.b64decode((hook.get("clientConfig") or {}).get("caBundle") or "")
        if (bundle != ca) if exact else (ca.strip() not in bundle):
            return False
    return True


def missing(error: errors.ApiError, plan: Plan) -> str:
    """What to do when the Secret or a configuration is missing or forbidden."""
    return (
        f"{error}: the Secret {plan.namespace}/{plan.secret} and the webhook configurations "
        f"({', '.join(n for _, n in plan.configurations()) or 'none'}) come with the manifests "
        "(kustomize/base/webhook); apply them, and the webhook's RBAC (get/update on that "
        "Secret, get/patch on those configurations)"
    )
