"""Every base and overlay renders with `kubectl kustomize` and passes a server-side dry run.

The API server validates each object as it would store it (schemas, RBAC escalation checks,
webhook configurations) without keeping anything. The namespace `kubeflow` must exist for the
namespaced objects, so it is created when missing and left in place (on a shared cluster other
processes may start using it at once: it is the services' default Lease namespace);
the kind and standalone overlays need cert-manager's kinds, installed from a stand-in CRD file
(schema-less) when cert-manager itself is absent, and removed afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kustomizing import BASE, ROOT, bases, overlays, render_text
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

STANDINS = Path(__file__).resolve().parent / "standins" / "cert-manager-crds.yaml"
CERT_MANAGER_CRDS = ("certificates.cert-manager.io", "issuers.cert-manager.io")


def _exists(cluster: ClusterHandle, *what: str) -> bool:
    return cluster.kubectl("get", *what, "--ignore-not-found", "-o", "name").stdout.strip() != ""


@pytest.fixture(scope="module")
def kubeflow_namespace(cluster: ClusterHandle) -> Iterator[None]:
    if not _exists(cluster, "namespace", "kubeflow"):
        cluster.kubectl("create", "namespace", "kubeflow")
    yield


@pytest.fixture(scope="module")
def cert_manager_kinds(cluster: ClusterHandle) -> Iterator[None]:
    missing = [c for c in CERT_MANAGER_CRDS if not _exists(cluster, "crd", c)]
    if missing:
        cluster.kubectl("apply", "-f", str(STANDINS))
        for crd in missing:
            cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}")
    yield
    for crd in missing:
        cluster.kubectl("delete", "crd", crd, "--ignore-not-found")


def _dry_run(cluster: ClusterHandle, path: Path) -> None:
    manifest = render_text(path)
    out = cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=kubetune-dry-run",
        "--force-conflicts",
        "-o",
        "json",
        "-f",
        "-",
        stdin=manifest,
        check=False,
    )
    where = path.relative_to(ROOT)
    assert out.returncode == 0, f"server dry run of {where} failed:\n{out.stderr}"
    applied = json.loads(out.stdout)
    items = applied.get("items", [applied])
    kinds = sorted({f"{i['kind']}/{i['metadata']['name']}" for i in items})
    assert kinds, f"{where} rendered nothing"


@pytest.mark.parametrize("path", bases(), ids=lambda p: f"base/{p.name}")
def test_base_dry_run(
    cluster: ClusterHandle, kubeflow_namespace: None, cert_manager_kinds: None, path: Path
) -> None:
    _dry_run(cluster, path)


def test_aggregate_dry_run(
    cluster: ClusterHandle, kubeflow_namespace: None, cert_manager_kinds: None
) -> None:
    _dry_run(cluster, BASE)


@pytest.mark.parametrize("path", overlays(), ids=lambda p: f"overlays/{p.name}")
def test_overlay_dry_run(
    cluster: ClusterHandle, kubeflow_namespace: None, cert_manager_kinds: None, path: Path
) -> None:
    _dry_run(cluster, path)
