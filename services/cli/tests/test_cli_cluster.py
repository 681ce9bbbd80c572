"""The CLI against a real API server: run, get, best, logs and plot on stored objects."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubetune_cli import main

from kubetune import metrichistory
from kubetune.kube import EXPERIMENTS, PODS, TRIALS, Kube
from kubetune_testkit.builders import trial
from kubetune_testkit.standins.services import trial_status
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

EXPERIMENT = """
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: demo}
spec:
  objective: {type: maximize, objectiveMetricName: accuracy}
  algorithm: {algorithmName: random}
  maxTrialCount: 3
  parameters:
    - {name: lr, parameterType: double, feasibleSpace: {min: "0.01", max: "0.1"}}
  trialTemplate:
    primaryContainerName: training
    trialParameters: [{name: lr, reference: lr}]
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers:
              - {name: training, image: python:3.11, command: [echo, "${trialParameters.lr}"]}
            restartPolicy: Never
"""


def _trial(name: str, lr: str, accuracy: str | None) -> dict[str, Any]:
    """A Trial of `demo` (its status under `_status`: written after the create)."""
    body = trial(name, experiment="demo", assignments={"lr": lr}, primary_container="training")
    body["_status"] = None if accuracy is None else trial_status("Succeeded", accuracy)
    return body


def _cli(cluster: ClusterHandle, namespace: str, *args: str) -> list[str]:
    return ["--kubeconfig", cluster.kubeconfig, "-n", namespace, *args]


def test_run_get_best_plot(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(EXPERIMENT)
    assert main.main(_cli(cluster, namespace, "run", str(manifest))) == 0
    assert f"experiment {namespace}/demo created" in capsys.readouterr().out
    assert main.main(_cli(cluster, namespace, "run", str(manifest))) == 1
    assert "already exists" in capsys.readouterr().err

    for name, lr, acc in [
        ("demo-a", "0.01", "0.5"),
        ("demo-b", "0.05", "0.9"),
        ("demo-c", "0.1", None),
    ]:
        body = _trial(name, lr, acc)
        status = body.pop("_status")
        kube.create(TRIALS, body, namespace)
        if status:
            kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")
        time.sleep(1.1)  # distinct creation timestamps give a stable creation order
    kube.patch(
        EXPERIMENTS,
        "demo",
        {
            "status": {
                "currentOptimalTrial": {
                    "bestTrialName": "demo-b",
                    "parameterAssignments": [{"name": "lr", "value": "0.05"}],
                    "observation": {
                        "metrics": [
                            {"name": "accuracy", "min": "0.9", "max": "0.9", "latest": "0.9"}
                        ]
                    },
                },
                "conditions": [
                    {"type": "Running", "status": "True", "reason": "ExperimentRunning"}
                ],
            }
        },
        namespace,
        subresource="status",
    )

    assert (
        main.main(_cli(cluster, namespace, "get", "demo", "--sort-by", "metric", "--descending"))
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["demo-b", "demo-a", "demo-c"]
    assert lines[1].split()[1:] == ["Succeeded", "0.05", "0.9"]
    assert lines[3].split()[1:] == ["Pending", "0.1", "-"]

    assert main.main(_cli(cluster, namespace, "get")) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["demo", "Running"]

    assert main.main(_cli(cluster, namespace, "best", "demo", "-o", "json")) == 0
    assert json.loads(capsys.readouterr().out)["bestTrialName"] == "demo-b"

    png = tmp_path / "plot.png"
    assert main.main(_cli(cluster, namespace, "plot", "demo", "-o", str(png))) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_unknown_experiment_and_trial(
    crds: None, cluster: ClusterHandle, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main(_cli(cluster, namespace, "get", "nope")) == 1
    assert (
        capsys.readouterr().err.strip()
        == f"kubetune: no experiment 'nope' in namespace '{namespace}'"
    )
    assert main.main(_cli(cluster, namespace, "logs", "nope")) == 1
    assert "no trial 'nope'" in capsys.readouterr().err


def test_logs_of_a_trial_pod(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = _trial("logged", "0.01", None)
    body.pop("_status")
    kube.create(TRIALS, body, namespace)
    kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "logged-pod", "labels": {"katib.kubeflow.org/trial": "logged"}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "training",
                        "image": "python:3.11",
                        "command": ["sh", "-c", "echo accuracy=0.42"],
                    },
                ],
            },
        },
        namespace,
    )
    wait_for(
        "the pod to finish",
        lambda: (
            kube.get(PODS, "logged-pod", namespace).get("status", {}).get("phase") == "Succeeded"
        ),
    )
    assert main.main(_cli(cluster, namespace, "logs", "logged")) == 0
    assert capsys.readouterr().out.strip() == "accuracy=0.42"


def test_metrics_of_a_trial(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kubetune metrics TRIAL`: the stored history as a table by step, JSON and a plot."""
    kube.create(TRIALS, trial("t1", experiment="demo"), namespace)
    assert main.main(_cli(cluster, namespace, "metrics", "t1")) == 1
    assert "trial t1 has no metric history yet" in capsys.readouterr().err
    history = metrichistory.History()
    for i in range(150):
        history.append("loss", f"{1 / (i + 1):.4f}", metrichistory.rfc3339(1_800_000_000 + i))
        if i % 2 == 0:
            history.append("accuracy", f"{i / 150:.2f}", metrichistory.rfc3339(1_800_000_000 + i))
    kube.patch(
        TRIALS,
        "t1",
        {"status": {metrichistory.FIELD: history.to_wire()}},
        namespace,
        subresource="status",
    )

    assert main.main(_cli(cluster, namespace, "metrics", "t1")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"trial {namespace}/t1: loss 150 of 150 reports kept, accuracy 75 of 75 reports kept"
    )
    assert lines[1].split() == ["STEP", "TIME", "LOSS", "ACCURACY"]
    # Tables show 4 significant digits (a stored "1.0000" reads 1); `-o json` keeps the text.
    assert lines[2].split() == ["0", "2027-01-15T08:00:00Z", "1", "0"]
    assert lines[-1].split() == ["149", "2027-01-15T08:02:29Z", "0.0067", "-"]

    assert main.main(_cli(cluster, namespace, "metrics", "t1", "--metric", "acc")) == 1
    assert "no history of metric 'acc' (it has: accuracy, loss)" in capsys.readouterr().err
    assert main.main(_cli(cluster, namespace, "metrics", "t1", "-o", "json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["accuracy"][1] == [1, "0.01", "2027-01-15T08:00:02Z"]

    png = tmp_path / "history.png"
    assert main.main(_cli(cluster, namespace, "metrics", "t1", "--plot", str(png))) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
