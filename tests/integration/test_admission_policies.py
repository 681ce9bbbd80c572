"""kustomize/base/policies on a real API server: kubetune's controllers are held to their shapes.

Each request impersonates the controller's ServiceAccount (`kubectl --as`), so RBAC and the
ValidatingAdmissionPolicies apply exactly as to the controller's own token, and uses a
server-side dry run, so nothing is stored. The ServiceAccounts, ClusterRoles and bindings come
from the rendered bases (their Deployments are left out: nothing needs to run).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kustomizing import BASE, of_kind, render, render_text
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

SUGGESTION_CONTROLLER = "system:serviceaccount:kubeflow:kubetune-suggestion-controller"
TRIAL_CONTROLLER = "system:serviceaccount:kubeflow:kubetune-trial-controller"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def policies(cluster: ClusterHandle) -> Iterator[None]:
    """The policies, the params and the two controllers' RBAC, applied for this module."""
    if cluster.kubectl("get", "namespace", "kubeflow", check=False).returncode != 0:
        cluster.kubectl("create", "namespace", "kubeflow")
    rbac = [
        o
        for base in ("suggestion-controller", "trial-controller", "suggestion-algorithm")
        for o in of_kind(render(BASE / base), *RBAC_KINDS)
    ]
    manifests = render_text(BASE / "policies") + "\n---\n" + yaml.safe_dump_all(rbac)
    cluster.kubectl("apply", "--server-side", "-f", "-", stdin=manifests)
    yield
    cluster.kubectl("delete", "--ignore-not-found", "-f", "-", stdin=manifests, check=False)


def _create(cluster: ClusterHandle, user: str, obj: Obj) -> tuple[bool, str]:
    """Create `obj` as `user` in a server-side dry run: (admitted, kubectl's error text)."""
    out = cluster.kubectl(
        "create", "--dry-run=server", f"--as={user}", "-f", "-", stdin=json.dumps(obj), check=False
    )
    return out.returncode == 0, out.stderr


def _refused(cluster: ClusterHandle, user: str, obj: Obj, because: str) -> str:
    """Wait (the API server loads new policies within seconds) until `obj` is refused."""
    deadline = time.monotonic() + 30
    while True:
        admitted, error = _create(cluster, user, obj)
        if not admitted and because in error:
            return error
        if time.monotonic() > deadline:
            pytest.fail(f"expected a refusal naming {because!r}; admitted={admitted} {error}")
        time.sleep(0.5)


def _pv(path: str, namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "policy-pv", "labels": {"katib.kubeflow.org/suggestion": "s"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "claimRef": {"namespace": namespace, "name": "s-pvc"},
            "hostPath": {"path": path, "type": "DirectoryOrCreate"},
        },
    }


def _deployment(namespace: str, pod: Obj) -> Obj:
    labels = {"katib.kubeflow.org/suggestion": "s", "katib.kubeflow.org/deployment": "s"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "s-random", "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def _container(**extra: Any) -> Obj:
    return {"name": "suggestion", "image": "ghcr.io/kubetune/suggestion-algorithm", **extra}


def test_hostpath_pv_only_under_the_configured_prefix(
    cluster: ClusterHandle, policies: None, namespace: str
) -> None:
    error = _refused(cluster, SUGGESTION_CONTROLLER, _pv("/", namespace), "must lie under")
    assert "/tmp/katib/suggestions/" in error
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _pv("/tmp/katib/suggestions-elsewhere/x", namespace),
        "must lie under",
    )
    admitted, error = _create(
        cluster, SUGGESTION_CONTROLLER, _pv("/tmp/katib/suggestions/s-pv", namespace)
    )
    assert admitted, error


def test_algorithm_pods_cannot_reach_the_host(
    cluster: ClusterHandle, policies: None, namespace: str
) -> None:
    privileged = _container(securityContext={"privileged": True})
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _deployment(namespace, {"containers": [privileged]}),
        "may not be privileged",
    )
    host_volume = {"name": "root", "hostPath": {"path": "/"}}
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _deployment(namespace, {"containers": [_container()], "volumes": [host_volume]}),
        "may mount only",
    )
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _deployment(namespace, {"containers": [_container()], "hostNetwork": True}),
        "host's network",
    )
    state = {"name": "state", "persistentVolumeClaim": {"claimName": "s-pvc"}}
    ordinary = {"containers": [_container()], "volumes": [state]}
    admitted, error = _create(cluster, SUGGESTION_CONTROLLER, _deployment(namespace, ordinary))
    assert admitted, error
    # Init containers are held to the same: the state directory's (root, CHOWN and FOWNER,
    # no escalation) is admitted; a privileged one, or one adding another capability, is not.
    owner = _container(
        name="state-directory",
        securityContext={
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
        },
    )
    with_owner = {**ordinary, "initContainers": [owner]}
    root = {"securityContext": {"privileged": True}}
    admitted, error = _create(cluster, SUGGESTION_CONTROLLER, _deployment(namespace, with_owner))
    assert admitted, error
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _deployment(namespace, {**ordinary, "initContainers": [{**owner, **root}]}),
        "may not be privileged",
    )
    admin = {"capabilities": {"add": ["SYS_ADMIN"]}}
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _deployment(
            namespace, {**ordinary, "initContainers": [{**owner, "securityContext": admin}]}
        ),
        "no capability but CHOWN and FOWNER",
    )


def _cleanup_pod(path: str, **spec: Any) -> Obj:
    """The shape of the suggestion-controller's hostPath cleanup Pod (its own namespace)."""
    container = _container(
        name="remove-directory",
        securityContext={
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]},
        },
        volumeMounts=[{"name": "host-prefix", "mountPath": "/kubetune-host-prefix"}],
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kubetune-hostpath-cleanup-0123456789-1",
            "namespace": "kubeflow",
            "labels": {"app.kubernetes.io/name": "kubetune-hostpath-cleanup"},
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [container],
            "volumes": [{"name": "host-prefix", "hostPath": {"path": path, "type": "Directory"}}],
            **spec,
        },
    }


def test_cleanup_pods_mount_only_the_prefix_and_no_token(
    cluster: ClusterHandle, policies: None
) -> None:
    error = _refused(cluster, SUGGESTION_CONTROLLER, _cleanup_pod("/"), "may mount only hostPath")
    assert "/tmp/katib/suggestions/" in error
    _refused(cluster, SUGGESTION_CONTROLLER, _cleanup_pod("/tmp/katib"), "may mount only hostPath")
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _cleanup_pod("/tmp/katib/suggestions", automountServiceAccountToken=True),
        "only hostPath cleanup pods",
    )
    _refused(
        cluster,
        SUGGESTION_CONTROLLER,
        _cleanup_pod("/tmp/katib/suggestions", hostPID=True),
        "host's network, PID or IPC",
    )
    admin = _cleanup_pod("/tmp/katib/suggestions")
    admin["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    _refused(cluster, SUGGESTION_CONTROLLER, admin, "no capability but DAC_OVERRIDE")
    admitted, error = _create(
        cluster, SUGGESTION_CONTROLLER, _cleanup_pod("/tmp/katib/suggestions")
    )
    assert admitted, error
    elsewhere = {**_cleanup_pod("/tmp/katib/suggestions")}
    elsewhere["metadata"] = {**elsewhere["metadata"], "namespace": "default"}
    admitted, error = _create(cluster, SUGGESTION_CONTROLLER, elsewhere)
    assert not admitted and "forbidden" in error, error  # RBAC: Pods only in its own namespace


def test_suggestion_controller_services_and_bindings(
    cluster: ClusterHandle, policies: None, namespace: str
) -> None:
    node_port: Obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s-random", "namespace": namespace},
        "spec": {"type": "NodePort", "ports": [{"port": 6789}], "selector": {"a": "b"}},
    }
    _refused(cluster, SUGGESTION_CONTROLLER, node_port, "type ClusterIP")
    account: Obj = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "anything-else", "namespace": namespace},
    }
    _refused(cluster, SUGGESTION_CONTROLLER, account, "creates only the ServiceAccount")
    account["metadata"]["name"] = "kubetune-suggestion-algorithm"
    admitted, error = _create(cluster, SUGGESTION_CONTROLLER, account)
    assert admitted, error


def test_trial_controller_creates_only_jobs_of_trials(
    cluster: ClusterHandle, policies: None, namespace: str
) -> None:
    job: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "not-a-trial", "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                }
            }
        },
    }
    _refused(cluster, TRIAL_CONTROLLER, job, "owned (controller reference) by a Trial")
    job["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "name": "t",
            "uid": "7d5d8f2e-4c1e-4d3b-9a51-2f0f3c1b6a11",
            "controller": True,
        }
    ]
    admitted, error = _create(cluster, TRIAL_CONTROLLER, job)
    assert admitted, error


def test_the_policies_alone_admit_the_controller_and_block_nobody_else(
    cluster: ClusterHandle, policies: None, namespace: str
) -> None:
    """The policies and bindings by themselves (deleted and applied again in one batch, as a
    reinstall does, and without any other object of kubetune's): the controller's own
    ServiceAccount is admitted, and the cluster admin's is never refused. With a param
    ConfigMap, a binding whose param was missing (not yet created, deleted, or lost when
    recreated with its policy: kubernetes/kubernetes#133827) refused every ServiceAccount
    create in the cluster, before its matchConditions were looked at."""
    manifests = render_text(BASE / "policies")
    cluster.kubectl("delete", "--wait=false", "-f", "-", stdin=manifests)
    alone = [o for o in yaml.safe_load_all(manifests) if o and "Policy" in o["kind"]]
    cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(alone))
    account: Obj = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "kubetune-suggestion-algorithm", "namespace": namespace},
    }
    theirs = {**account, "metadata": {"name": "someone-elses", "namespace": namespace}}
    try:
        _refused(cluster, SUGGESTION_CONTROLLER, {**account, "metadata": {
            "name": "anything-else", "namespace": namespace}}, "creates only")  # fmt: skip
        mine, my_error = _create(cluster, SUGGESTION_CONTROLLER, account)
        assert mine, my_error
        out = cluster.kubectl(  # the cluster admin's own credentials, no impersonation
            "create", "--dry-run=server", "-f", "-", stdin=json.dumps(theirs), check=False
        )
        assert out.returncode == 0, out.stderr
    finally:
        cluster.kubectl("apply", "--server-side", "-f", "-", stdin=manifests)
