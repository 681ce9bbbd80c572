"""Cross-package tests; the `cluster` and `namespace` fixtures come from the localcluster plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcluster.pytest_plugin import ClusterHandle

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def crds_installed(cluster: ClusterHandle) -> None:
    """kubetune's CRDs (Experiment, Suggestion, Trial) on the session's API server."""
    cluster.kubectl("apply", "-k", str(ROOT / "kustomize/base/crds"))
    for plural in ("experiments", "suggestions", "trials"):
        cluster.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            f"crd/{plural}.kubeflow.org",
        )
