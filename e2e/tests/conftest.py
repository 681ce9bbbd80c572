"""End-to-end tests: kubetune deployed as the node agent's pods on a real control plane.

The session's cluster (localcluster plugin) must run kubetune's images as this repository's
console scripts, so before it starts, the image map template
e2e/localcluster/images/kubetune.yaml is rendered with this interpreter's bin directory
(deploying.render_image_map) and handed to the node agent through LOCALCLUSTER_IMAGE_MAP
(unless that is set already), with entries that run the real operators' images as the
binaries `localcluster build-operators` builds (realoperators.py).
"""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pytest
from deploying import render_image_map
from realoperators import image_map_entries, install_argo, install_training_operator

from localcluster.pytest_plugin import ClusterHandle


def pytest_configure(config: pytest.Config) -> None:
    if (
        os.environ.get("LOCALCLUSTER_IMAGE_MAP")
        or os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1"
    ):
        return
    fd, path = tempfile.mkstemp(prefix="kubetune-image-map-", suffix=".yaml")
    with os.fdopen(fd, "w") as fh:
        fh.write(render_image_map() + textwrap.indent(image_map_entries(), "  "))
    os.environ["LOCALCLUSTER_IMAGE_MAP"] = path
    config.stash[_MAP_KEY] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_MAP_KEY, None)
    if path:
        os.environ.pop("LOCALCLUSTER_IMAGE_MAP", None)
        Path(path).unlink(missing_ok=True)


_MAP_KEY = pytest.StashKey[str]()


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
