"""End-to-end tests: kubetune deployed as the node agent's pods on a real control plane.

The session's cluster (localcluster plugin) must run kubetune's images as this repository's
console scripts, so before it starts, the image map template
e2e/localcluster/images/kubetune.yaml is rendered with this interpreter's bin directory
(deploying.render_image_map) and handed to the node agent through LOCALCLUSTER_IMAGE_MAP
(unless that is set already), with entries that run the real operators' images as the
binaries `localcluster build-operators` builds (realoperators.py) and a Katib gRPC algorithm
image as testkit's `katib-test-algorithm`.
"""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from realoperators import image_map_entries, install_argo, install_training_operator

from kubetune_testkit.deploying import (
    apply_overlay,
    enable_injection,
    render_image_map,
    venv_bin,
    wait_available,
)
from localcluster.pytest_plugin import ClusterHandle


def pytest_configure(config: pytest.Config) -> None:
    if (
        os.environ.get("LOCALCLUSTER_IMAGE_MAP")
        or os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1"
    ):
        return
    fd, path = tempfile.mkstemp(prefix="kubetune-image-map-", suffix=".yaml")
    with os.fdopen(fd, "w") as fh:
        fh.write(
            render_image_map()
            + textwrap.indent(image_map_entries(), "  ")
            + textwrap.indent(KATIB_TEST_IMAGES, "  ")
        )
    os.environ["LOCALCLUSTER_IMAGE_MAP"] = path
    config.stash[_MAP_KEY] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_MAP_KEY, None)
    if path:
        os.environ.pop("LOCALCLUSTER_IMAGE_MAP", None)
        Path(path).unlink(missing_ok=True)


_MAP_KEY = pytest.StashKey[str]()
KATIB_TEST_IMAGES = f"""\
- match: "example.com/kubetune-tests/katib-grid*"
  entrypoint: [katib-test-algorithm, suggestion]
  env: {{PYTHONUNBUFFERED: "1"}}
  path: ["{venv_bin()}"]
"""
"""A Katib gRPC algorithm image (test_algorithms.py): testkit's Katib-protocol grid server."""


@pytest.fixture(scope="session")
def training_operator(cluster: ClusterHandle) -> ClusterHandle:
    """The real Kubeflow training-operator (TFJob, PyTorchJob), once per session."""
    install_training_operator(cluster)
    return cluster


@pytest.fixture(scope="session")
def argo(cluster: ClusterHandle) -> ClusterHandle:
    """The real Argo workflow-controller (executor: argoexec), once per session."""
    install_argo(cluster)
    return cluster


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """When a test on the deployed overlay fails, what the cluster looked like: the test
    namespace's objects and events, and the tail of each kubetune service's log (a timeout
    alone says nothing about which service stalled)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    cluster, ns = funcargs.get("kubetune"), funcargs.get("ns")
    if cluster is None or ns is None:
        return
    parts = []
    for args in (
        ("get", "experiments,suggestions,trials,jobs,pods", "-n", ns, "-o", "wide"),
        ("get", "events", "-n", ns, "--sort-by=.lastTimestamp"),
        ("get", "pods", "-n", "kubeflow", "-o", "wide"),
        ("get", "pods", "-n", ns, "-o", CONTAINER_STATES),
        ("get", "workflows,tfjobs,pytorchjobs", "-n", ns, "-o", "yaml"),
        ("logs", "-n", "argo", "deployment/workflow-controller", "--tail=60"),
    ):
        out = cluster.kubectl(*args, check=False)
        parts.append(f"$ kubectl {' '.join(args)}\n{out.stdout}{out.stderr}")
    for service in SERVICES:
        out = cluster.kubectl(
            "logs", "-n", "kubeflow", f"deployment/kubetune-{service}", "--tail=40", check=False
        )
        parts.append(f"$ kubectl logs deployment/kubetune-{service} --tail=40\n{out.stdout}")
    out = cluster.kubectl(
        "logs", "-n", ns, "-l", "katib.kubeflow.org/suggestion", "--tail=40", check=False
    )
    parts.append(f"$ kubectl logs -n {ns} -l katib.kubeflow.org/suggestion --tail=40\n{out.stdout}")
    report.sections.append(("cluster state at the failure", "\n".join(parts)))


# Each container's state, so a pod stuck NotReady shows which container still runs and why.
CONTAINER_STATES = (
    "jsonpath={range .items[*]}{.metadata.name}{'\\n'}"
    "{range .status.containerStatuses[*]}{'  '}{.name}{' '}{.state}{'\\n'}{end}{end}"
)

SERVICES = ("experiment-controller", "suggestion-controller", "trial-controller", "webhook")


@pytest.fixture(scope="module")
def kubetune(cluster: ClusterHandle) -> ClusterHandle:
    """kubetune deployed: the local overlay here; on an existing cluster (kind) the overlay its
    scripts applied (e2e/kind/run-e2e.sh), unless KUBETUNE_E2E_LOCAL_OVERLAY=1 asks for ours.
    Left in place after the module: a teardown would race the next module's apply."""
    if (
        os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") != "1"
        or os.environ.get("KUBETUNE_E2E_LOCAL_OVERLAY") == "1"
    ):
        apply_overlay(cluster)
    wait_available(cluster)
    return cluster


@pytest.fixture
def ns(kubetune: ClusterHandle, namespace: str) -> str:
    """A test namespace with collector injection enabled."""
    enable_injection(kubetune, namespace)
    return namespace
