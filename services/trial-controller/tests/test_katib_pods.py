"""A Trial still running a pod Katib's webhook injected is reported by name: a Warning Event on
the Trial and on its Experiment, once, with what to do. The controller runs with the shipped
ClusterRole, so its right to create Events is tested too.

The Job's pod template carries Katib's sidecar as Katib v0.19.0's webhook adds it (its
collector's Go flags, `-s-db` naming Katib's db-manager); here no webhook runs, so the Job
controller's pod is that pod. Its containers run `sleep` on the node agent.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import EVENTS, EXPERIMENTS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

KATIB_SIDECAR = {
    "name": "metrics-logger-and-collector",
    "image": "ghcr.io/kubeflow/katib/file-metrics-collector:v0.19.0",
    # The node agent runs the command on the host: `sh -c` ignores the collector's flags.
    "command": ["sh", "-c", "sleep 600"],
    "args": [
        "-t",
        "mnist-x7k2pq9d",
        "-m",
        "accuracy",
        "-o-type",
        "maximize",
        "-s-db",
        "katib-db-manager.kubeflow:6789",
        "-path",
        "/var/log/katib/metrics.log",
    ],
}


def _experiment(kube: Kube, namespace: str) -> dict[str, Any]:
    return kube.create(
        EXPERIMENTS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "metadata": {"name": "mnist"},
            "spec": {
                "objective": {"type": "maximize", "objectiveMetricName": "accuracy"},
                "algorithm": {"algorithmName": "random"},
                "parameters": [
                    {
                        "name": "lr",
                        "parameterType": "double",
                        "feasibleSpace": {"min": "0.01", "max": "0.1"},
                    }
                ],
                "trialTemplate": {"primaryContainerName": "training", "trialSpec": {}},
            },
        },
        namespace,
    )


def _events(kube: Kube, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in kube.list_all(EVENTS, namespace, field_selector="reason=KatibCollectorPod")
        if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name
    ]


def test_a_running_trial_with_katibs_sidecar_is_reported_on_trial_and_experiment(
    kube: Kube, namespace: str, controller: Any, limited_kubeconfig: str
) -> None:
    experiment = _experiment(kube, namespace)
    owner = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "name": "mnist",
        "uid": experiment["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    katib_job = batch_job("sleep 600", container="training")
    katib_job["spec"]["template"]["spec"]["containers"].append(KATIB_SIDECAR)
    body = trial("mnist-x7k2pq9d", katib_job, experiment="mnist", primary_container="training")
    body["metadata"]["ownerReferences"] = [owner]
    kube.create(TRIALS, body, namespace)
    plain = trial(
        "mnist-plain001",
        batch_job("sleep 600", container="training"),
        experiment="mnist",
        primary_container="training",
    )
    plain["metadata"]["ownerReferences"] = [owner]
    kube.create(TRIALS, plain, namespace)
    controller(kubeconfig=limited_kubeconfig)

    on_experiment = wait_for(
        "the Experiment's KatibCollectorPod event",
        lambda: _events(kube, namespace, "Experiment", "mnist"),
        90,
    )
    (event,) = on_experiment
    assert event["type"] == "Warning"
    message = event["message"]
    assert message.startswith(
        "Trial mnist-x7k2pq9d cannot be taken over: its pod(s) mnist-x7k2pq9d-"
    )
    assert "carry Katib's metrics collector" in message and "delete the Trial" in message
    (on_trial,) = wait_for(
        "the Trial's event", lambda: _events(kube, namespace, "Trial", "mnist-x7k2pq9d"), 30
    )
    assert on_trial["message"] == message
    wait_for(
        "both Trials Running",
        lambda: all(
            any(
                c["type"] == "Running" and c["status"] == "True"
                for c in (kube.get(TRIALS, n, namespace).get("status") or {}).get("conditions")
                or []
            )
            for n in ("mnist-x7k2pq9d", "mnist-plain001")
        ),
        60,
    )
    assert _events(kube, namespace, "Trial", "mnist-plain001") == []
    assert len(_events(kube, namespace, "Experiment", "mnist")) == 1  # once, however many passes
