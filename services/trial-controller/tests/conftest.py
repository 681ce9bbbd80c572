"""Fixtures of the integration tests: the collector's ClusterRole, the trial-controller as a real
process (its console script, against the test cluster, watching only the test's namespace), and
a kubeconfig holding only the shipped role. `kube`, `crds`, `thirdparty_crds` and the helpers
to build Trials and wait for their state come from `kubetune_testkit`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import errors
from kubetune.kube import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, SERVICE_ACCOUNTS, Kube
from kubetune_testkit.accounts import cluster_role, service_account_token, token_kubeconfig
from kubetune_testkit.paths import BASE
from kubetune_testkit.processes import ServiceProcess

COLLECTOR_ROLE = BASE / "trial-controller" / "collector-clusterrole.yaml"
ROLE_FILE = BASE / "trial-controller" / "clusterrole.yaml"


@pytest.fixture(scope="session")
def collector_role(kube: Kube, crds: None) -> Iterator[None]:
    """The collector's ClusterRole the controller binds (removed at the end if ours)."""
    with cluster_role(kube, COLLECTOR_ROLE):
        yield


@pytest.fixture
def limited_kubeconfig(cluster: Any, kube: Kube, namespace: str, tmp_path: Path) -> Iterator[str]:
    """A kubeconfig with the token of a ServiceAccount that holds only the shipped role."""
    name = f"kubetune-trial-controller-test-{namespace}"
    role = yaml.safe_load(ROLE_FILE.read_text())
    role["metadata"] = {"name": name}
    kube.create(CLUSTER_ROLES, role)
    kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "trial-controller"}}, namespace)
    kube.create(
        CLUSTER_ROLE_BINDINGS,
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
        token = service_account_token(cluster, "trial-controller", namespace)
        yield token_kubeconfig(cluster.kubeconfig, token, tmp_path / "limited.kubeconfig")
    finally:
        for resource in (CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES):
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, name)


@pytest.fixture
def controller(
    cluster: Any,
    namespace: str,
    collector_role: None,
    services: Callable[..., ServiceProcess],
) -> Iterator[Callable[..., ServiceProcess]]:
    """A factory: `controller("--trial-resources", "...")` starts the controller (once)."""
    handles: list[ServiceProcess] = []

    def start(
        *extra: str, kubeconfig: str | None = None, leader_elect: bool = False
    ) -> ServiceProcess:
        if leader_elect:
            extra = ("--leader-elect", f"--leader-election-namespace={namespace}", *extra)
        else:
            extra = ("--no-leader-elect", *extra)
        handle = services(
            "trial-controller",
            "--kubeconfig",
            kubeconfig or cluster.kubeconfig,
            "--watch-namespace",
            namespace,
            "--probe-port=0",
            "--log-level=debug",
            *extra,
        )
        handles.append(handle)
        return handle.start()

    yield start
    for handle in handles:
        code = handle.stop()
        assert code in (0, None, -9), f"controller exited {code}\n{handle.logs()}"
