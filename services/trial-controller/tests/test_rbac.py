"""The shipped ClusterRole is enough: the controller runs as a ServiceAccount bound to exactly
those rules (kustomize/base/trial-controller/clusterrole.yaml) and does its whole job."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, batch_job, is_true, observe, trial, wait_for

from kubetune import errors
from kubetune.kube import JOBS, TRIALS, Kube, Resource

pytestmark = pytest.mark.integration
CLUSTERROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTERROLEBINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLE_FILE = REPO / "kustomize" / "base" / "trial-controller" / "clusterrole.yaml"


@pytest.fixture
def limited_kubeconfig(cluster: Any, kube: Kube, namespace: str, tmp_path: Path) -> Iterator[str]:
    """A kubeconfig with the token of a ServiceAccount that holds only the shipped role."""
    name = f"kubetune-trial-controller-test-{namespace}"
    role = yaml.safe_load(ROLE_FILE.read_text())
    role["metadata"] = {"name": name}
    kube.create(CLUSTERROLES, role)
    kube.create(SERVICEACCOUNTS, {"metadata": {"name": "trial-controller"}}, namespace)
    kube.create(
        CLUSTERROLEBINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "trial-controller", "namespace": namespace}
            ],
        },
    )
    try:
        token = cluster.kubectl(
            "create", "token", "trial-controller", "-n", namespace, "--duration=1h"
        ).stdout.strip()
        config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        config["users"] = [{"name": "limited", "user": {"token": token}}]
        for context in config["contexts"]:
            context["context"]["user"] = "limited"
        path = tmp_path / "limited.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        yield str(path)
    finally:
        for resource in (CLUSTERROLEBINDINGS, CLUSTERROLES):
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, name)


def test_runs_with_the_shipped_cluster_role(
    kube: Kube, namespace: str, controller: Any, limited_kubeconfig: str
) -> None:
    controller(kubeconfig=limited_kubeconfig)
    kube.create(TRIALS, trial("least", batch_job("true"), retain=False), namespace)
    wait_for(
        "job complete",
        lambda: (
            (kube.get_or_none(JOBS, "least", namespace) or {}).get("status", {}).get("succeeded")
        ),
        90,
    )
    observe(kube, namespace, "least", "0.6")
    wait_for("Succeeded", lambda: is_true(kube.get(TRIALS, "least", namespace), "Succeeded"))
    wait_for("job deleted", lambda: kube.get_or_none(JOBS, "least", namespace) is None, 60)
