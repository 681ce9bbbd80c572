"""Katib's own algorithms beyond the Optuna ones, on the local overlay (issue 16).

A hyperband Experiment with the settings of Katib's hp-tuning/hyperband.yaml (eta 2, r_l 2) runs
to the end of its schedule: upstream's bracket math gives bracket s=1 (2 new configurations at
resource 1, then the better one again at 2) and bracket s=0 (2 new configurations at 2), 5
Trials in all, after which the search is exhausted and the Experiment Succeeded. The algorithm
pod is deleted while the first rung runs: its replacement continues from the Suggestion's status.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import test_local_overlay as overlay
from test_local_overlay import another_cluster_ports, deployed, rendered  # noqa: F401 (fixtures)

from kubetune import naming
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration
Obj = dict[str, Any]

SCORE = (
    "import sys; lr, layers, epochs = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]); "
    "print('accuracy=' + str(round(lr * 10 + layers / 100 + epochs / 1000, 6)))"
)


def _hyperband(name: str, namespace: str) -> Obj:
    experiment = overlay._experiment(name, namespace, "Never")
    spec = experiment["spec"]
    spec["algorithm"] = {
        "algorithmName": "hyperband",
        "algorithmSettings": [
            {"name": "resource_name", "value": "num-epochs"},
            {"name": "eta", "value": "2"},
            {"name": "r_l", "value": "2"},
        ],
    }
    spec["objective"] = {"type": "maximize", "objectiveMetricName": "accuracy"}
    spec["maxTrialCount"] = 10  # more than hyperband's 5: the schedule's end ends the Experiment
    spec["parameters"] = [
        {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.03"}},
        {"name": "num-layers", "parameterType": "int", "feasibleSpace": {"min": "2", "max": "5"}},
        {"name": "num-epochs", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "1"}},
    ]
    template = spec["trialTemplate"]
    template["trialParameters"] = [
        {"name": "learningRate", "reference": "lr"},
        {"name": "numberLayers", "reference": "num-layers"},
        {"name": "numberEpochs", "reference": "num-epochs"},
    ]
    container = template["trialSpec"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = [
        "python3",
        "-c",
        SCORE,
        "${trialParameters.learningRate}",
        "${trialParameters.numberLayers}",
        "${trialParameters.numberEpochs}",
    ]
    return experiment


def _kill_algorithm_pod_once_assigned(cluster: ClusterHandle, namespace: str, name: str) -> None:
    """Wait for the first rung's assignments, then delete the algorithm's pod."""
    deadline = time.monotonic() + overlay.EXPERIMENT_TIMEOUT
    while time.monotonic() < deadline:
        out = cluster.kubectl("get", "suggestion", "-n", namespace, name, "-o", "json", check=False)
        if out.returncode == 0:
            status = json.loads(out.stdout).get("status") or {}
            if len(status.get("suggestions") or []) >= 2:
                break
        time.sleep(1)
    selector = f"{naming.LABEL_SUGGESTION}={naming.label_value(name)}"
    out = cluster.kubectl("delete", "pod", "-n", namespace, "-l", selector, "--wait=false")
    assert "deleted" in out.stdout, f"no algorithm pod to delete: {out.stdout} {out.stderr}"


def _wait_until_done(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    deadline = time.monotonic() + overlay.EXPERIMENT_TIMEOUT
    exp: Obj = {}
    while time.monotonic() < deadline:
        exp = overlay._json(cluster, "get", "experiment", "-n", namespace, name)
        done = {
            c["type"] for c in (exp.get("status") or {}).get("conditions") or []
            if c["status"] == "True"
        }  # fmt: skip
        if done & {"Succeeded", "Failed"}:
            break
        time.sleep(2)
    lines = [f"Experiment {name}: {overlay._conditions(exp)}"]
    for kind in ("suggestion", "trial"):
        for obj in overlay._json(cluster, "get", kind, "-n", namespace)["items"]:
            lines.append(f"{kind} {obj['metadata']['name']}: {overlay._conditions(obj)}")
    assert overlay._condition(exp, "Succeeded").get("status") == "True", "\n".join(lines)
    return exp


def test_hyperband_runs_upstreams_brackets_and_survives_a_restart(
    cluster: ClusterHandle,
    deployed: list[Obj],  # noqa: F811
    namespace: str,
) -> None:
    overlay.test_every_deployment_becomes_available(cluster, deployed)
    name = "hyperband"
    cluster.kubectl(
        "label", "namespace", namespace, "katib.kubeflow.org/metrics-collector-injection=enabled"
    )
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(_hyperband(name, namespace)))
    _kill_algorithm_pod_once_assigned(cluster, namespace, name)
    exp = _wait_until_done(cluster, namespace, name)
    assert overlay._condition(exp, "Succeeded")["reason"] == "ExperimentSuggestionEndReached"

    suggestion = overlay._json(cluster, "get", "suggestion", "-n", namespace, name)
    order = [s["name"] for s in suggestion["status"]["suggestions"]]
    trials = {
        t["metadata"]["name"]: t
        for t in overlay._json(cluster, "get", "trial", "-n", namespace)["items"]
        if t["metadata"]["name"].startswith(f"{name}-")
    }
    assert len(order) == 5 and sorted(order) == sorted(trials)

    def point(trial: str) -> dict[str, str]:
        return {p["name"]: p["value"] for p in trials[trial]["spec"]["parameterAssignments"]}

    def accuracy(trial: str) -> float:
        metrics = trials[trial]["status"]["observation"]["metrics"]
        return float(next(m["latest"] for m in metrics if m["name"] == "accuracy"))

    points = [point(t) for t in order]
    # bracket s=1: rung 0 = 2 configurations at 1 epoch, rung 1 = the better one at 2 epochs;
    # bracket s=0: 2 new configurations at 2 epochs.
    assert [p["num-epochs"] for p in points] == ["1", "1", "2", "2", "2"]
    best = max(order[:2], key=accuracy)
    assert {k: v for k, v in points[2].items() if k != "num-epochs"} == {
        k: v for k, v in point(best).items() if k != "num-epochs"
    }
    fresh = {(p["lr"], p["num-layers"]) for p in points[:2] + points[3:]}
    assert len(fresh) == 4
    for trial in order:
        assert overlay._condition(trials[trial], "Succeeded").get("status") == "True"
