"""Fixtures shared by the integration tests: the CRDs on the session's cluster and a client."""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import errors
from kubetune.kube import CUSTOM_RESOURCE_DEFINITIONS, Kube, connect

REPO = Path(__file__).resolve().parents[3]
SCRIPT = shutil.which("suggestion-algorithm") or str(
    Path(sys.executable).parent / "suggestion-algorithm"
)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    kube = Kube(connect(cluster.kubeconfig))
    for path in sorted((REPO / "kustomize" / "base" / "crds").glob("*.kubeflow.org.yaml")):
        with contextlib.suppress(errors.AlreadyExists):
            kube.create(CUSTOM_RESOURCE_DEFINITIONS, yaml.safe_load(path.read_text()))

    def served() -> bool:
        try:
            kube.resource_for("kubeflow.org/v1beta1", "Suggestion")
            return True
        except errors.NotFound:
            return False

    wait_for("CRDs served", served)
    return kube
