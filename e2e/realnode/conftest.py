"""kubetune from its own images on a real node: containerd, kubelet, kube-proxy, CNI and
CoreDNS beside the local control plane (`localcluster up --node kubelet`), deployed with
kustomize/overlays/real as a cluster would run it.

These tests live apart from e2e/tests: there every pod is a host process of the node agent,
and that conftest renders the agent's image map and the `local` overlay (host ports, URL
webhook); here nothing of that may be present, or a test could pass only thanks to it.

The images are the OCI archives `images/build.py --oci-dir DIR` writes (tox -e node-e2e builds
them first), found through KUBETUNE_REALNODE_IMAGES=DIR and imported into the node's
containerd. One real node per machine: when another run holds the node's lock, the session
waits for it (up to KUBETUNE_REALNODE_LOCK_WAIT seconds, default 1800) and never breaks it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import running

from kubetune_testkit.deploying import apply_real_overlay, enable_injection, wait_available
from kubetune_testkit.trialkinds import PodPython
from localcluster import build, nodebuild, nodeoperators, operators
from localcluster import cluster as lc
from localcluster import node as real_node
from localcluster.pytest_plugin import ClusterHandle

IMAGES_ENV = "KUBETUNE_REALNODE_IMAGES"
# What the e2e runs: every service of the overlay and the example trainer.
ARCHIVES = (
    "experiment-controller",
    "suggestion-controller",
    "suggestion-algorithm",
    "trial-controller",
    "webhook",
    "db-manager",
    "pns-collector",
    "ui",
    "examples",
)
TRAINER_IMAGE = "docker.io/kubetune/examples:dev"
TRAINER = PodPython("python3", TRAINER_IMAGE)
"""Trial containers run the example trainer image's python3 (testkit's trialkinds)."""
LOADED: dict[str, list[str]] = {}
"""Archive name -> the image names `localcluster load` reported for it."""


def image_archives() -> list[Path]:
    """The archives to load, or a failure naming the command that makes them."""
    directory = os.environ.get(IMAGES_ENV)
    make = f"python3 images/build.py --oci-dir DIR, then {IMAGES_ENV}=DIR"
    if not directory:
        pytest.fail(f"{IMAGES_ENV} is not set: {make} (tox -e node-e2e does)", pytrace=False)
    paths = [Path(directory) / f"{name}.tar" for name in ARCHIVES]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        pytest.fail(f"image archives missing in {directory}: {missing}: {make}", pytrace=False)
    return paths


def up_when_free(state_dir: Path) -> lc.State:
    """`up --node kubelet`, waiting while another run holds the machine's one real node."""
    wait = float(os.environ.get("KUBETUNE_REALNODE_LOCK_WAIT", "1800"))
    try:
        return lc.up_real_node(state_dir, wait=wait, bind_to_parent=True, timeout=300)
    except lc.ClusterError as exc:
        pytest.fail(f"the real node did not start: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def cluster(cluster_state_dir: Path) -> Iterator[ClusterHandle]:
    """The control plane with the real node (replaces the plugin's node-agent cluster)."""
    if os.geteuid() != 0:
        from kubetune_testkit.skips import skip

        skip("needs root", "the real node runs containerd, the kubelet and kube-proxy as root")
    if not build.have_binaries():
        pytest.fail("control-plane binaries missing: run `localcluster build`", pytrace=False)
    missing = nodebuild.binaries().missing()
    if missing:
        pytest.fail(f"node binaries missing ({missing}): `localcluster build-node`", pytrace=False)
    archives = image_archives()
    try:
        state = up_when_free(cluster_state_dir)
        for archive in archives:
            LOADED[archive.stem] = real_node.load(archive)
        yield ClusterHandle(
            kubeconfig=state.kubeconfig,
            kubectl_path=state.kubectl,
            server=state.server,
            state=state,
        )
    finally:
        lc.down(cluster_state_dir, quiet=True)


@pytest.fixture(scope="session")
def kubetune(cluster: ClusterHandle) -> ClusterHandle:
    """kustomize/overlays/real applied, every kubetune Deployment Available."""
    apply_real_overlay(cluster)
    try:
        wait_available(cluster, timeout=420)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}\n{running.describe(cluster, 'kubeflow')}") from None
    return cluster


@pytest.fixture
def ns(kubetune: ClusterHandle, namespace: str) -> str:
    """A test namespace with collector injection enabled."""
    enable_injection(kubetune, namespace)
    return namespace


@pytest.fixture(scope="session")
def real_operators(kubetune: ClusterHandle) -> ClusterHandle:
    """The real training-operator and Argo Workflows, installed as `localcluster
    install-operators` does (their images made here and imported, the releases' manifests),
    once per session."""
    unbuilt = [op.name for op in operators.OPERATORS.values() if not operators.is_built(op)]
    if unbuilt:
        pytest.fail(
            f"operators not built ({unbuilt}): `localcluster build-operators`", pytrace=False
        )
    state = kubetune.state
    assert state is not None
    try:
        nodeoperators.install(state.kubectl, state.kubeconfig, state.node_dir / "operator-images")
    except nodeoperators.InstallError as exc:
        pytest.fail(f"installing the operators failed: {exc}", pytrace=False)
    return kubetune
