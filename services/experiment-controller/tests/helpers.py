"""Builders shared by the unit tests: Experiments, trial summaries and Suggestions as dicts."""

from __future__ import annotations

from typing import Any

from kubetune import naming
from kubetune.api.experiment import Experiment
from kubetune_experiment_controller.planning import SuggestionView
from kubetune_experiment_controller.summaries import TrialSummary, summarise

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "spec": {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "training-container",
                        "image": "busybox",
                        "command": ["sh", "-c", "echo lr=${trialParameters.learningRate}"],
                    }
                ],
            }
        }
    },
}


def experiment(
    name: str = "exp",
    *,
    max_trials: int | None = 12,
    parallel: int | None = 3,
    max_failed: int | None = None,
    objective_type: str = "maximize",
    goal: float | None = None,
    strategies: list[dict[str, str]] | None = None,
    resume: str | None = None,
    status: dict[str, Any] | None = None,
    trial_spec: dict[str, Any] | None = None,
) -> Experiment:
    objective: dict[str, Any] = {"type": objective_type, "objectiveMetricName": "accuracy"}
    if goal is not None:
        objective["goal"] = goal
    if strategies is not None:
        objective["metricStrategies"] = strategies
    spec: dict[str, Any] = {
        "objective": objective,
        "algorithm": {"algorithmName": "random"},
        "parameters": [
            {
                "name": "lr",
                "parameterType": "double",
                "feasibleSpace": {"min": "0.01", "max": "0.1"},
            }
        ],
        "trialTemplate": {
            "primaryContainerName": "training-container",
            "trialParameters": [{"name": "learningRate", "reference": "lr"}],
            "trialSpec": trial_spec if trial_spec is not None else JOB,
        },
    }
    if max_trials is not None:
        spec["maxTrialCount"] = max_trials
    if parallel is not None:
        spec["parallelTrialCount"] = parallel
    if max_failed is not None:
        spec["maxFailedTrialCount"] = max_failed
    if resume is not None:
        spec["resumePolicy"] = resume
    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": "ns", "uid": "uid-1"},
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return Experiment.model_validate(body)


def trial(
    index: int,
    state: str | None = None,
    *,
    accuracy: dict[str, str] | None = None,
    experiment: str = "exp",
    lr: str = "0.05",
) -> TrialSummary:
    conditions = [{"type": "Created", "status": "True"}]
    if state is not None:
        conditions.append({"type": state, "status": "True"})
    obj: dict[str, Any] = {
        "metadata": {
            "name": naming.trial_name(experiment, str(index)),
            "creationTimestamp": f"2026-01-01T00:{index // 60:02d}:{index % 60:02d}Z",
        },
        "spec": {"parameterAssignments": [{"name": "lr", "value": lr}]},
        "status": {"conditions": conditions},
    }
    if accuracy is not None:
        obj["status"]["observation"] = {"metrics": [{"name": "accuracy", **accuracy}]}
    return summarise(obj)


def suggestion(
    count: int = 0,
    *,
    requests: int = 0,
    experiment: str = "exp",
    failed: bool = False,
    annotations: dict[str, str] | None = None,
    settings: list[dict[str, str]] | None = None,
) -> SuggestionView:
    status: dict[str, Any] = {
        "suggestions": [
            {
                "name": naming.trial_name(experiment, str(i)),
                "parameterAssignments": [{"name": "lr", "value": f"0.0{i % 9 + 1}"}],
            }
            for i in range(count)
        ],
        "suggestionCount": count,
    }
    if failed:
        status["conditions"] = [
            {"type": "Failed", "status": "True", "reason": "SuggestionFailed", "message": "x"}
        ]
    if settings is not None:
        status["algorithmSettings"] = settings
    meta: dict[str, Any] = {"name": experiment, "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    return SuggestionView.of(
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Suggestion",
            "metadata": meta,
            "spec": {"requests": requests, "algorithm": {"algorithmName": "random"}},
            "status": status,
        }
    )
