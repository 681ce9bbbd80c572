"""Against a real API server: the webhook provisions, renews and serves its own certificate.

Two `webhook serve` processes (two replicas) serve from one Secret of the test's namespace,
which they fill themselves (one of them, by Lease), and set the caBundle of the kustomize base's
configurations, pointed at the first one by URL and scoped to the test's namespace. Nothing else
hands them a certificate: an Experiment checked by the API server through the webhook proves
the caBundle is theirs.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ssl
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from kubetune import naming
from kubetune.kube import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
)
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.waiting import wait_for
from kubetune_testkit.webhook import (
    Webhook,
    configurations,
    registered,
    running,
    wait_effective,
)
from kubetune_webhook import certificates, rotating

pytestmark = pytest.mark.integration

SECRET = "kubetune-webhook-cert"


@contextlib.contextmanager
def replica(
    cluster: Any, directory: Path, namespace: str, config: str, port: int
) -> Iterator[None]:
    """One `webhook serve` on `port`, from the Secret, provisioning it."""
    directory.mkdir(parents=True)
    log = directory / "webhook.log"
    argv = [
        console_script("webhook"), "serve", "--address=127.0.0.1", f"--port={port}",
        f"--kubeconfig={cluster.kubeconfig}", f"--pod-namespace={namespace}",
        f"--cert-secret={SECRET}", "--cert-ips=127.0.0.1", "--cert-secret-interval=0.5",
        f"--cert-file={directory / 'tls.crt'}", f"--key-file={directory / 'tls.key'}",
        f"--mutating-webhook-configurations={config}",
        f"--validating-webhook-configurations={config}",
    ]  # fmt: skip
    with running(argv, log, timeout=60):
        yield


def _secret(kube: Kube, namespace: str) -> dict[str, bytes]:
    return rotating.decoded(kube.get(SECRETS, SECRET, namespace))


def _served(port: int) -> x509.Certificate:
    return x509.load_pem_x509_certificate(ssl.get_server_certificate(("127.0.0.1", port)).encode())


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _wait_serving(port: int, expected: Callable[[], x509.Certificate]) -> None:
    wait_for(f"replica {port} to serve {expected()}", lambda: _served(port) == expected(), 30)


def _bundles(kube: Kube, config: str) -> set[bytes]:
    out = set()
    for resource in (MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS):
        for hook in kube.get(resource, config)["webhooks"]:
            out.add(base64.b64decode(hook["clientConfig"].get("caBundle") or ""))
    return out


def _days_left(pem: bytes) -> float:
    cert = x509.load_pem_x509_certificate(pem)
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    return left / datetime.timedelta(days=1)


@pytest.fixture
def installed(cluster: Any, kube: Kube, crds: None, namespace: str) -> Iterator[str]:
    """The empty Secret, as the manifests ship it, in a namespace labelled for injection;
    yields a name for the configurations."""
    kube.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": SECRET}},
        namespace,
    )
    cluster.kubectl(
        "label", "namespace", namespace, f"{naming.LABEL_INJECTION}={naming.INJECTION_ENABLED}"
    )
    name = f"kubetune-webhook-test-{uuid.uuid4().hex[:8]}"
    yield name


def test_replicas_provision_rotate_and_serve_the_secrets_certificate(
    cluster: Any, kube: Kube, installed: str, namespace: str, tmp_path: Path
) -> None:
    first, second = free_port(), free_port()
    at_first = Webhook(f"https://127.0.0.1:{first}", b"", tmp_path / "unused.log")
    with (
        registered(kube, configurations(at_first, namespace, installed)),
        replica(cluster, tmp_path / "a", namespace, installed, first),
        replica(cluster, tmp_path / "b", namespace, installed, second),
    ):
        data = wait_for("the Secret filled", lambda: _secret(kube, namespace).get("ca.crt"))
        # The caBundle was written by the webhook itself, and the API server trusts it.
        wait_for("caBundle set", lambda: _bundles(kube, installed) == {data})
        wait_effective(cluster, namespace)
        for port in (first, second):
            _wait_serving(port, lambda: _cert(_secret(kube, namespace)["tls.crt"]))

        # Near expiry: a CA good for 30 more days (less than a new certificate's
        # 365) and a certificate good for one, as a cluster left alone for years has.
        old_ca, old_ca_key = certificates.make_ca(days=30)
        old_cert, old_key = certificates.make_serving(old_ca, old_ca_key, [], ["127.0.0.1"], days=1)
        secret = kube.get(SECRETS, SECRET, namespace)
        secret["data"] = {
            k: base64.b64encode(v).decode()
            for k, v in {
                "ca.crt": old_ca, "ca.key": old_ca_key,
                "tls.crt": old_cert, "tls.key": old_key,
            }.items()
        }  # fmt: skip
        kube.replace(SECRETS, secret, namespace)

        def renewed_secret() -> dict[str, bytes] | None:
            data = _secret(kube, namespace)
            done = data.get(rotating.CA_PREVIOUS) == old_ca and _days_left(data["tls.crt"]) > 300
            return data if done else None

        renewed = wait_for("the leader to renew the CA and the certificate", renewed_secret, 60)
        assert _days_left(renewed["ca.crt"]) > 3000
        assert renewed[rotating.CA_PREVIOUS] == old_ca
        # The caBundle follows: the new CA, and the old one until it expires.
        bundle = renewed["ca.crt"].rstrip(b"\n") + b"\n" + old_ca
        wait_for("caBundle follows", lambda: _bundles(kube, installed) == {bundle})
        new_cert = x509.load_pem_x509_certificate(renewed["tls.crt"])
        new_ca = x509.load_pem_x509_certificate(renewed["ca.crt"])
        new_cert.verify_directly_issued_by(new_ca)
        # Both replicas pick the new certificate up without a restart.
        for port in (first, second):
            _wait_serving(port, lambda: new_cert)
        wait_effective(cluster, namespace)
