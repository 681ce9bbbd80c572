"""Fixtures of the integration tests: CRDs and the controller running in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetune.kube import Kube, connect
from tests.standins import RunningController

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "kustomize" / "base" / "crds"


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    return Kube(connect(cluster.kubeconfig))


@pytest.fixture(scope="session")
def crds(cluster: Any) -> None:
    """kubetune's CRDs (idempotent; left installed, the other services share them)."""
    cluster.kubectl("apply", "-k", str(CRDS))
    cluster.kubectl(
        "wait", "--for", "condition=established", "--timeout", "60s",
        "crd/experiments.kubeflow.org", "crd/suggestions.kubeflow.org", "crd/trials.kubeflow.org",
    )  # fmt: skip


@pytest.fixture
def controller(kube: Kube, namespace: str, crds: None) -> Iterator[RunningController]:
    running_controller = RunningController(kube, namespace).start()
    yield running_controller
    running_controller.stop()
