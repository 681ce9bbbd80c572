"""Against a real API server: the webhook is not Ready while Katib's webhook configuration
exists, says what to delete, and becomes Ready once it is gone."""

from __future__ import annotations

import contextlib
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kubetune import errors
from kubetune.katibsidecar import KATIB_WEBHOOK
from kubetune.kube import MUTATING_WEBHOOK_CONFIGURATIONS, Kube
from kubetune_testkit.processes import free_port
from kubetune_testkit.waiting import wait_for
from kubetune_testkit.webhook import Webhook, clean_env, serving

pytestmark = pytest.mark.integration


def _get(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _readiness(webhook: Webhook, probe_port: int) -> tuple[int, int]:
    """/readyz on the HTTPS port and on the plain-HTTP probe port (`--probe-port`), which must
    agree whenever the webhook's readiness is not changing between the two requests."""
    context = ssl.create_default_context(cadata=webhook.ca_pem.decode())
    https = _get(f"{webhook.url}/readyz", context)
    assert https in (200, 503), https
    return https, _get(f"http://127.0.0.1:{probe_port}/readyz")


def _katibs_mutating_configuration() -> dict[str, Any]:
    """Katib's configuration by its name, without webhooks: present, and harmless to admission."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": KATIB_WEBHOOK},
        "webhooks": [],
    }


def test_not_ready_beside_katibs_webhook_naming_the_delete_command(
    cluster: Any, kube: Kube, tmp_path: Path
) -> None:
    kube.create(MUTATING_WEBHOOK_CONFIGURATIONS, _katibs_mutating_configuration())
    try:
        env = clean_env(KUBETUNE_WEBHOOK_KATIB_CHECK_INTERVAL="0.5")
        probe_port = free_port()
        with serving(
            cluster.kubeconfig, tmp_path, f"--probe-port={probe_port}", env=env
        ) as webhook:
            assert _get(f"http://127.0.0.1:{probe_port}/healthz") == 200
            assert _readiness(webhook, probe_port) == (503, 503)
            log = webhook.log.read_text()
            assert f"MutatingWebhookConfiguration {KATIB_WEBHOOK}" in log, log
            assert f"kubectl delete mutatingwebhookconfiguration {KATIB_WEBHOOK}" in log, log
            kube.delete(MUTATING_WEBHOOK_CONFIGURATIONS, KATIB_WEBHOOK)
            wait_for(
                "the webhook to become ready on both ports",
                lambda: _readiness(webhook, probe_port) == (200, 200),
                timeout=30,
            )
    finally:
        with contextlib.suppress(errors.NotFound):
            kube.delete(MUTATING_WEBHOOK_CONFIGURATIONS, KATIB_WEBHOOK)
