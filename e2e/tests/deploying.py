"""Deploy kubetune's `local` overlay on the test cluster and wait until it serves.

Shared by the end-to-end tests and the demo: apply the overlay server-side, wait for every
Deployment to become Available, and label a namespace for trial-pod injection.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "kustomize" / "overlays" / "local"
KUBETUNE_NAMESPACE = "kubeflow"
INJECTION_LABEL = "katib.kubeflow.org/metrics-collector-injection=enabled"


class Kubectl(Protocol):
    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> Any: ...


def apply_overlay(cluster: Kubectl) -> None:
    out = cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-k", str(OVERLAY), check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl apply -k {OVERLAY} failed:\n{out.stderr}")


def wait_available(cluster: Kubectl, timeout: float = 240.0) -> None:
    """Every Deployment of kubetune Available, else an error naming the ones that are not."""
    deadline = time.monotonic() + timeout
    pending: list[str] = []
    while time.monotonic() < deadline:
        items = json.loads(
            cluster.kubectl("get", "deployments", "-n", KUBETUNE_NAMESPACE, "-o", "json").stdout
        )["items"]
        pending = [
            d["metadata"]["name"]
            for d in items
            if not any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (d.get("status") or {}).get("conditions") or []
            )
        ]
        if items and not pending:
            return
        time.sleep(1)
    raise RuntimeError(f"Deployments not Available after {timeout:.0f}s: {', '.join(pending)}")


def enable_injection(cluster: Kubectl, namespace: str) -> None:
    cluster.kubectl("label", "namespace", namespace, INJECTION_LABEL, "--overwrite")


IMAGE_MAP_TEMPLATE = ROOT / "e2e" / "localcluster" / "images" / "kubetune.yaml"
VENV_BIN_PLACEHOLDER = "@VENV_BIN@"


def venv_bin() -> str:
    """The bin directory of the environment the tests (and so the services) run in."""
    return str(Path(sys.prefix) / "bin")


def render_image_map(template: Path = IMAGE_MAP_TEMPLATE, bin_dir: str | None = None) -> str:
    """The node agent's image map with the venv bin directory filled in."""
    return template.read_text().replace(VENV_BIN_PLACEHOLDER, bin_dir or venv_bin())
