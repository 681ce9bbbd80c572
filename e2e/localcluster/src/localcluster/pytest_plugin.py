"""pytest plugin: a real control plane per test session and a fresh namespace per test.

Registered through the ``pytest11`` entry point, so any package that installs
``localcluster`` gets the ``cluster`` and ``namespace`` fixtures and the ``integration``
marker. With ``KUBETUNE_E2E_EXISTING_CLUSTER=1`` and ``KUBECONFIG`` set, the session uses
that cluster (e.g. kind) instead of starting one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from localcluster import build
from localcluster import cluster as lc
from localcluster.kubectlrun import Kubectl


@dataclass
class ClusterHandle:
    """What tests get: where the cluster is and how to talk to it."""

    kubeconfig: str
    kubectl_path: str
    server: str
    state: lc.State | None  # None when an existing cluster is used

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` for this cluster (admin credentials)."""
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=self.kubeconfig, client_configuration=cfg
        )
        return client.ApiClient(configuration=cfg)

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the kubectl built with the cluster (never the system one)."""
        proc = Kubectl(self.kubectl_path, self.kubeconfig).run(*args, stdin=stdin)
        if check:
            proc.check_returncode()
        return proc


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs a real Kubernetes control plane (localcluster)"
    )


def _existing_cluster() -> ClusterHandle | None:
    if os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") != "1":
        return None
    kcfg = os.environ.get("KUBECONFIG")
    if not kcfg:
        raise pytest.UsageError("KUBETUNE_E2E_EXISTING_CLUSTER=1 needs KUBECONFIG")
    kubectl = build.binaries().kubectl
    path = str(kubectl) if kubectl.exists() else (shutil.which("kubectl") or "kubectl")
    return ClusterHandle(kubeconfig=kcfg, kubectl_path=path, server="", state=None)


@pytest.fixture(scope="session")
def cluster_state_dir() -> Iterator[Path]:
    """A private state dir per session, so a developer's own ``localcluster up`` is untouched."""
    d = Path(tempfile.mkdtemp(prefix="localcluster-pytest-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(cluster_state_dir: Path) -> Iterator[ClusterHandle]:
    """Bring the control plane up once per session and always tear it down again.

    ``LOCALCLUSTER_NODE=kubelet`` runs it with a real node instead of the node agent
    (root, ``localcluster build-node`` first; one real node per machine).
    """
    existing = _existing_cluster()
    if existing is not None:
        yield existing
        return
    if not build.have_binaries():
        pytest.fail(
            "control-plane binaries are not built: run `localcluster build` "
            f"(cache {build.binaries().bin_dir})",
            pytrace=False,
        )
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt("SIGTERM")

    if previous in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            state = lc.up(
                cluster_state_dir,
                bind_to_parent=True,
                quiet=True,
                node_mode=os.environ.get("LOCALCLUSTER_NODE", ""),
            )
        except lc.ClusterError as exc:
            pytest.fail(f"local cluster failed to start: {exc}", pytrace=False)
        yield ClusterHandle(
            kubeconfig=state.kubeconfig,
            kubectl_path=state.kubectl,
            server=state.server,
            state=state,
        )
    finally:
        lc.down(cluster_state_dir, quiet=True)
        if previous in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _ns_name(nodeid: str) -> str:
    base = "".join(c if c.isalnum() else "-" for c in nodeid.split("::")[-1].lower())
    base = base.strip("-")[:40].strip("-") or "t"
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def namespace(cluster: ClusterHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A unique namespace, ready for pods (its ``default`` ServiceAccount exists)."""
    from kubernetes import client

    name = _ns_name(request.node.nodeid)
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, labels={"kubetune.test/namespace": "true"})
        )
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        sas = core.list_namespaced_service_account(name, field_selector="metadata.name=default")
        if sas.items:
            break
        time.sleep(0.2)
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        api.close()
