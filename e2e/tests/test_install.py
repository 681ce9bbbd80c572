"""Install in one command on a fresh cluster: the rendered local overlay applied alone.

A cluster of its own (not the session's, where other tests deploy kubetune first), then
`kubectl apply --server-side` of the overlay as rendered for it, and nothing else: no
cert-manager, no `webhook certs`, no generated katib-config. The webhook must provision its own
certificate and caBundle; an Experiment the API server sends through the webhook (defaulted by
it, and an invalid one refused by it) proves the caBundle it wrote is trusted.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetune_testkit import builders, deploying, skips
from kubetune_testkit.kubectl import apply, get_json
from localcluster import cluster as lc
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

NAMESPACE = "kubeflow"
AVAILABLE_TIMEOUT = float(os.environ.get("KUBETUNE_E2E_AVAILABLE_TIMEOUT", "180"))


@pytest.fixture(scope="module")
def fresh() -> Iterator[ClusterHandle]:
    """A new local cluster for this module alone, torn down afterwards."""
    if os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1":
        skips.skip("existing cluster", "this module installs on a fresh local cluster of its own")
    state_dir = Path(tempfile.mkdtemp(prefix="localcluster-install-"))
    try:
        state = lc.up(state_dir, bind_to_parent=True, quiet=True)
        yield ClusterHandle(state.kubeconfig, state.kubectl, state.server, state)
    finally:
        lc.down(state_dir, quiet=True)


@pytest.fixture(scope="module")
def installed(fresh: ClusterHandle) -> ClusterHandle:
    deploying.apply_overlay(fresh)
    deploying.wait_available(fresh, AVAILABLE_TIMEOUT)
    return fresh


def test_the_webhook_writes_its_own_ca_bundle_and_admits_experiments(
    installed: ClusterHandle,
) -> None:
    secret = get_json(installed, "secret", "kubetune-webhook-cert", "-n", NAMESPACE)
    ca = base64.b64decode(secret["data"]["ca.crt"])
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        config = get_json(installed, kind, "kubetune-webhook")
        for hook in config["webhooks"]:
            bundle = base64.b64decode(hook["clientConfig"]["caBundle"])
            assert bundle == ca, f"{kind} {hook['name']}: caBundle is not the Secret's CA"

    installed.kubectl("create", "namespace", "install-check")
    deploying.enable_injection(installed, "install-check")
    invalid = builders.experiment("refused", "install-check", maxTrialCount=0)
    refused = apply(installed, invalid)
    assert refused.returncode != 0 and "must be greater than 0" in refused.stderr, refused.stderr
    apply(installed, builders.experiment("admitted", "install-check", maxTrialCount=1), check=True)
    experiment = get_json(installed, "experiment", "admitted", "-n", "install-check")
    # Filled in by the mutating webhook, so the API server called it over TLS.
    assert experiment["spec"]["objective"].get("metricStrategies"), experiment["spec"]
