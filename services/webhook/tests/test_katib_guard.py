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
from kubetune_testkit.waiting import wait_for
from kubetune_testkit.webhook import Webhook, clean_env, serving

pytestmark = pytest.mark.integration


def _ready(webhook: Webhook) -> bool:
    context = ssl.create_default_context(cadata=webhook.ca_pem.decode())
    try:
        with urllib.request.urlopen(f"{webhook.url}/readyz", context=context, timeout=5) as r:
            return bool(r.status == 200)
    except urllib.error.HTTPError as e:
        assert e.code == 503, e
        return False


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
        with serving(cluster.kubeconfig, tmp_path, env=env) as webhook:
            assert not _ready(webhook)
            log = webhook.log.read_text()
            assert f"MutatingWebhookConfiguration {KATIB_WEBHOOK}" in log, log
            assert f"kubectl delete mutatingwebhookconfiguration {KATIB_WEBHOOK}" in log, log
            kube.delete(MUTATING_WEBHOOK_CONFIGURATIONS, KATIB_WEBHOOK)
            wait_for("the webhook to become ready", lambda: _ready(webhook), timeout=30)
    finally:
        with contextlib.suppress(errors.NotFound):
            kube.delete(MUTATING_WEBHOOK_CONFIGURATIONS, KATIB_WEBHOOK)
