"""`kubetune katib-check` against a real API server: Katib's webhook configurations and
Deployments, as Katib v0.19.0's manifests name them, are refused by name with the command that
removes each; Trials running pods Katib's webhook injected are listed by name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from kubetune_cli import main

from kubetune import errors
from kubetune.kube import (
    DEPLOYMENTS,
    EXPERIMENTS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PODS,
    TRIALS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
)
from kubetune_testkit import builders
from kubetune_testkit.builders import trial
from kubetune_testkit.standins.services import trial_status
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

WEBHOOK = "katib.kubeflow.org"


def _webhook(namespace: str) -> dict[str, object]:
    """Katib's webhook configuration, reduced to one webhook that matches nothing here
    (another test's namespace never carries the label)."""
    return {
        "metadata": {"name": WEBHOOK},
        "webhooks": [
            {
                "name": "defaulter.experiment.katib.kubeflow.org",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "clientConfig": {
                    "service": {"name": "katib-controller", "namespace": namespace, "path": "/x"}
                },
                "namespaceSelector": {"matchLabels": {"never": "matches"}},
                "rules": [
                    {
                        "apiGroups": ["kubeflow.org"],
                        "apiVersions": ["v1beta1"],
                        "operations": ["CREATE"],
                        "resources": ["experiments"],
                    }
                ],
            }
        ],
    }


@pytest.fixture
def katib_installed(kube: Kube, namespace: str) -> Iterator[None]:
    for res in (MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS):
        kube.create(res, _webhook(namespace))
    for name in ("katib-controller", "katib-db-manager", "katib-ui"):
        labels = {"katib.kubeflow.org/component": name}
        kube.create(
            DEPLOYMENTS,
            {
                "metadata": {"name": name},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": name, "image": f"katib/{name}"}]},
                    },
                },
            },
            namespace,
        )
    try:
        yield
    finally:
        for res in (MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS):
            with contextlib.suppress(errors.NotFound):
                kube.delete(res, WEBHOOK)


def _katib_pod(name: str, trial_name: str, sidecar_args: list[str]) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": {"katib.kubeflow.org/trial": trial_name}},
        "spec": {
            "nodeName": "nowhere",  # never runs: only its spec is read
            "containers": [
                {"name": "training", "image": "python:3.12", "command": ["sh", "-c", "true"]},
                {
                    "name": "metrics-logger-and-collector",
                    "image": "ghcr.io/kubeflow/katib/file-metrics-collector:v0.19.0",
                    "args": sidecar_args,
                },
            ],
        },
    }


def test_katib_components_are_refused_by_name_and_katib_trials_listed(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    katib_installed: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, state in (
        ("mnist-x7k2pq9d", "Running"),
        ("mnist-ours0001", "Running"),
        ("mnist-done0001", "Succeeded"),
    ):
        kube.create(TRIALS, trial(name, experiment="mnist"), namespace)
        kube.patch(TRIALS, name, {"status": trial_status(state)}, namespace, subresource="status")
    katib = ["-t", "mnist-x7k2pq9d", "-m", "accuracy", "-s-db", "katib-db-manager.kubeflow:6789"]
    kube.create(PODS, _katib_pod("mnist-x7k2pq9d-abcde", "mnist-x7k2pq9d", katib), namespace)
    ours = ["--trial-name", "mnist-ours0001", "--namespace", namespace]
    kube.create(PODS, _katib_pod("mnist-ours0001-abcde", "mnist-ours0001", ours), namespace)
    done = ["-t", "mnist-done0001", "-s-db", "katib-db-manager.kubeflow:6789"]
    kube.create(PODS, _katib_pod("mnist-done0001-abcde", "mnist-done0001", done), namespace)

    args = ["--kubeconfig", cluster.kubeconfig, "-n", namespace, "katib-check"]
    assert main.main(args) == 1
    out = capsys.readouterr().out
    assert "Katib still runs here; kubetune must not run beside it. Remove:" in out
    assert f"kubectl delete mutatingwebhookconfiguration {WEBHOOK}" in out
    assert f"kubectl delete validatingwebhookconfiguration {WEBHOOK}" in out
    assert f"kubectl -n {namespace} delete deployment katib-controller" in out
    assert f"kubectl -n {namespace} delete deployment katib-db-manager" in out
    assert "katib-ui" not in out  # Katib's UI does not contend with kubetune
    assert (
        f"trial {namespace}/mnist-x7k2pq9d cannot be taken over: its pod(s) "
        "mnist-x7k2pq9d-abcde carry Katib's metrics collector; delete the Trial" in out
    )
    assert "mnist-ours0001" not in out and "mnist-done0001" not in out

    for res in (MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS):
        kube.delete(res, WEBHOOK)
    for name in ("katib-controller", "katib-db-manager"):
        kube.delete(DEPLOYMENTS, name, namespace)
    assert main.main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("no Katib controller, db-manager or webhook configuration found\n")
    assert f"trial {namespace}/mnist-x7k2pq9d cannot be taken over" in out


def test_katibs_finalizers_are_named_then_released_once_katib_is_gone(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Katib's controller adds `update-prometheus-metrics` to Experiments and
    `clean-metrics-in-db` to Trials; without it, deleting them would hang for ever."""
    experiment = builders.experiment("mnist", namespace)
    experiment["metadata"]["finalizers"] = ["update-prometheus-metrics"]
    kube.create(EXPERIMENTS, experiment, namespace)
    held = trial("mnist-x7k2pq9d", experiment="mnist")
    held["metadata"]["finalizers"] = ["clean-metrics-in-db", "example.com/keep"]
    kube.create(TRIALS, held, namespace)
    kube.create(TRIALS, trial("mnist-free0001", experiment="mnist"), namespace)
    args = ["--kubeconfig", cluster.kubeconfig, "-n", namespace, "katib-check"]

    assert main.main(args) == 0
    out = capsys.readouterr().out
    assert (
        "2 objects hold a finalizer only Katib's controller removes (deleting them would hang): "
        f"Experiment {namespace}/mnist, Trial {namespace}/mnist-x7k2pq9d; run "
        "`kubetune katib-check --release-finalizers` once Katib is removed" in out
    )

    assert main.main([*args, "--release-finalizers"]) == 0
    out = capsys.readouterr().out
    assert "released Katib's finalizer from 2 objects" in out
    assert "finalizer" not in out.split("\n", 1)[1]
    assert "finalizers" not in kube.get(EXPERIMENTS, "mnist", namespace)["metadata"]
    assert kube.get(TRIALS, "mnist-x7k2pq9d", namespace)["metadata"]["finalizers"] == [
        "example.com/keep"
    ]
    kube.delete(EXPERIMENTS, "mnist", namespace)
    wait_for(
        "the Experiment gone", lambda: kube.get_or_none(EXPERIMENTS, "mnist", namespace) is None
    )


def test_releasing_finalizers_is_refused_while_katib_runs(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    katib_installed: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    held = trial("mnist-x7k2pq9d", experiment="mnist")
    held["metadata"]["finalizers"] = ["clean-metrics-in-db"]
    kube.create(TRIALS, held, namespace)
    args = ["--kubeconfig", cluster.kubeconfig, "-n", namespace, "katib-check"]
    assert main.main([*args, "--release-finalizers"]) == 1
    assert "--release-finalizers refused while Katib runs" in capsys.readouterr().err
    assert kube.get(TRIALS, "mnist-x7k2pq9d", namespace)["metadata"]["finalizers"] == [
        "clean-metrics-in-db"
    ]
    kube.patch(TRIALS, "mnist-x7k2pq9d", {"metadata": {"finalizers": None}}, namespace)
