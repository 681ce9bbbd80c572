"""The real training-operator and Argo Workflows on the test cluster, as node-agent pods.

The binaries are built from the operators' pinned Go modules (``localcluster
build-operators``, cached); their images map to those binaries in the node agent's image
map (``image_map_entries``), so each operator runs as a Deployment's pod the way it runs on
a real cluster: ServiceAccount and RBAC from the release's manifests, the webhook served
through a Service, the serving certificate from its Secret volume. On an existing cluster
(kind) the operators installed by e2e/kind/install-operators.sh are used instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

import yaml

from kubetune_testkit.deploying import ROOT
from kubetune_testkit.processes import free_port
from kubetune_testkit.waiting import wait_for
from localcluster import nodeoperators, operators, thirdparty

Obj = dict[str, Any]
TRAINING_IMAGE = "ghcr.io/kubeflow/training-v1/training-operator:v1-9.2"
ARGO_CONTROLLER_IMAGE = "quay.io/argoproj/workflow-controller:v3.7.9"
ARGOEXEC_IMAGE = "quay.io/argoproj/argoexec:v3.7.9"
TRAINING_NAMESPACE = "kubeflow"
ARGO_NAMESPACE = "argo"
# What an alpine image brings that the host lacks: nslookup answering from /etc/hosts (the
# PyTorchJob init container waits for the master's name with it).
ALPINE_BIN = ROOT / "e2e" / "localcluster" / "images" / "alpine-bin"


class Cluster(Protocol):
    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> Any: ...


def existing_cluster() -> bool:
    return os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1"


def image_map_entries() -> str:
    """Image-map YAML entries: the operators' images run the built binaries."""
    to = operators.TRAINING_OPERATOR
    argo = operators.ARGO_WORKFLOWS
    entries = [
        {"match": "ghcr.io/kubeflow/training-v1/training-operator*",
         "entrypoint": [str(operators.binary(to, "training-operator.v1"))]},
        {"match": "quay.io/argoproj/workflow-controller*",
         "entrypoint": [str(operators.binary(argo, "workflow-controller"))]},
        # The controller gives argoexec containers `command: [argoexec, ...]`.
        {"match": "quay.io/argoproj/argoexec*",
         "entrypoint": [str(operators.binary(argo, "argoexec"))],
         "path": [str(operators.binary(argo, "argoexec").parent)]},
        {"match": "alpine*", "entrypoint": [], "path": [str(ALPINE_BIN)]},
    ]  # fmt: skip
    return yaml.safe_dump(entries, default_flow_style=False)


def _apply(cluster: Cluster, objs: list[Obj]) -> None:
    text = yaml.safe_dump_all(objs)
    out = cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=text, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl apply failed:\n{out.stderr}")


def _docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _crd_names(files: list[str]) -> list[str]:
    return [
        str(yaml.safe_load(thirdparty.crd_path(n).read_text())["metadata"]["name"]) for n in files
    ]


def _wait_installed(cluster: Cluster, files: list[str], ns: str, deployment: str) -> None:
    """On an existing cluster: the operator e2e/kind/install-operators.sh installed."""
    for crd in _crd_names(files):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=120s")
    cluster.kubectl("rollout", "status", "-n", ns, f"deployment/{deployment}", "--timeout=300s")


def _install_crds(cluster: Cluster, files: list[str]) -> None:
    for name in files:
        path = thirdparty.crd_path(name)
        out = cluster.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", str(path), check=False
        )
        if out.returncode != 0:
            raise RuntimeError(f"installing {name} failed:\n{out.stderr}")
    for crd in _crd_names(files):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=120s")


def _namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _service_account(name: str, ns: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns},
    }


def _cluster_binding(name: str, role: str, sa: str, ns: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
    }


def _deployment(name: str, ns: str, labels: dict[str, str], pod: Obj) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def install_training_operator(cluster: Cluster) -> None:
    """TFJob/PyTorchJob CRDs and the operator's Deployment; returns once its webhook serves."""
    crds = ["kubeflow.org_tfjobs.yaml", "kubeflow.org_pytorchjobs.yaml"]
    if existing_cluster():
        _wait_installed(cluster, crds, TRAINING_NAMESPACE, "training-operator")
        return
    _install_crds(cluster, crds)
    operators.build_all(["training-operator"])
    ns = TRAINING_NAMESPACE
    port = free_port()
    labels = {"control-plane": "kubeflow-training-operator"}
    role = _docs(thirdparty.crd_path("role.yaml"))[0]
    webhook = _docs(thirdparty.crd_path("manifests.yaml"))[0]
    webhook["metadata"] = {"name": "validator.training-operator.kubeflow.org"}
    for hook in webhook["webhooks"]:
        hook["clientConfig"]["service"].update(name="training-operator", namespace=ns)
    pod = {
        "serviceAccountName": "training-operator",
        "terminationGracePeriodSeconds": 10,
        "containers": [
            {
                "name": "training-operator",
                "image": TRAINING_IMAGE,
                "args": [
                    "--enable-scheme=tfjob",
                    "--enable-scheme=pytorchjob",
                    f"--webhook-server-port={port}",
                    # Pods share the host network: no fixed ports besides the webhook's.
                    "--metrics-bind-address=0",
                    "--health-probe-bind-address=0",
                ],
                "env": [
                    {
                        "name": "MY_POD_NAMESPACE",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                    }
                ],
                "ports": [{"containerPort": port, "name": "webhook-server"}],
                "volumeMounts": [
                    {
                        "name": "cert",
                        "mountPath": "/tmp/k8s-webhook-server/serving-certs",
                        "readOnly": True,
                    }
                ],
            }
        ],
        "volumes": [{"name": "cert", "secret": {"secretName": "training-operator-webhook-cert"}}],
    }
    _apply(
        cluster,
        [
            _namespace(ns),
            _service_account("training-operator", ns),
            role,
            _cluster_binding(
                "training-operator", role["metadata"]["name"], "training-operator", ns
            ),
            # Filled by the operator's cert rotator, which also sets the webhook's caBundle.
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "training-operator-webhook-cert", "namespace": ns},
            },
            webhook,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "training-operator", "namespace": ns},
                "spec": {
                    "selector": labels,
                    "ports": [{"name": "webhook-server", "port": 443, "targetPort": port}],
                },
            },
            _deployment("training-operator", ns, labels, pod),
        ],
    )
    probe = nodeoperators.webhook_probe(ns)

    def serving() -> bool:
        out = cluster.kubectl(
            "create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe), check=False
        )
        return bool(out.returncode == 0)

    # The rotator writes the Secret; the agent refreshes secret volumes every minute.
    wait_for("the training-operator webhook to serve", serving, 240, interval=1)


ARGO_CRDS = [
    "argoproj.io_workflows.yaml",
    "argoproj.io_workflowtemplates.yaml",
    "argoproj.io_clusterworkflowtemplates.yaml",
    "argoproj.io_cronworkflows.yaml",
    "argoproj.io_workflowtaskresults.yaml",
    "argoproj.io_workflowtasksets.yaml",
    "argoproj.io_workflowartifactgctasks.yaml",
    "argoproj.io_workfloweventbindings.yaml",
]


def install_argo(cluster: Cluster) -> None:
    """Argo's CRDs and its workflow-controller Deployment (executor: the built argoexec)."""
    if existing_cluster():
        _wait_installed(cluster, ARGO_CRDS, ARGO_NAMESPACE, "workflow-controller")
        return
    _install_crds(cluster, ARGO_CRDS)
    operators.build_all(["argo-workflows"])
    ns = ARGO_NAMESPACE
    role = _docs(thirdparty.crd_path("workflow-controller-clusterrole.yaml"))[0]
    labels = {"app": "workflow-controller"}
    pod = {
        "serviceAccountName": "argo",
        "containers": [
            {
                "name": "workflow-controller",
                "image": ARGO_CONTROLLER_IMAGE,
                "args": ["--executor-image", ARGOEXEC_IMAGE, "--configmap",
                         "workflow-controller-configmap"],
                "env": [{"name": "LEADER_ELECTION_DISABLE", "value": "true"}],
            }
        ],
    }  # fmt: skip
    _apply(
        cluster,
        [
            _namespace(ns),
            _service_account("argo", ns),
            role,
            _cluster_binding("argo-binding", role["metadata"]["name"], "argo", ns),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "workflow-controller-configmap", "namespace": ns},
                # Pods share the host network: no metrics servers on fixed ports.
                "data": {
                    "metricsConfig": "enabled: false\n",
                    "telemetryConfig": "enabled: false\n",
                },
            },
            _deployment("workflow-controller", ns, labels, pod),
        ],
    )
    cluster.kubectl(
        "rollout", "status", "-n", ns, "deployment/workflow-controller", "--timeout=180s"
    )


def grant_argo_executor(cluster: Cluster, ns: str, service_account: str = "default") -> None:
    """The release's `executor` Role, bound to the workflows' ServiceAccount in ``ns``."""
    role = _docs(thirdparty.crd_path("executor-role.yaml"))[0]
    role["metadata"]["namespace"] = ns
    _apply(
        cluster,
        [
            role,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "executor-default", "namespace": ns},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": role["metadata"]["name"],
                },
                "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": ns}],
            },
        ],
    )
