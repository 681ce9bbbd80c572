"""Builders shared by the unit tests: Experiments, trial summaries and Suggestions as dicts."""

from __future__ import annotations

from typing import Any

from kubetune import naming
from kubetune.api.experiment import Experiment
from kubetune_experiment_controller.planning import SuggestionView
from kubetune_experiment_controller.summaries import TrialSummary, summarise
from kubetune_testkit import builders

JOB = builders.trial_job()


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
    algorithm: str = "random",
    early_stopping: dict[str, Any] | None = None,
) -> Experiment:
    """An Experiment as the controller reads it (namespace `ns`, uid `uid-1`); no metric
    strategies unless given, so the defaults of the rules are what is tested."""
    objective = builders.objective(kind=objective_type, strategies=False, goal=goal)
    if strategies is not None:
        objective["metricStrategies"] = strategies
    spec: dict[str, Any] = {
        "maxTrialCount": max_trials,
        "parallelTrialCount": parallel,
        "maxFailedTrialCount": max_failed,
        "resumePolicy": resume,
        "earlyStopping": early_stopping,
    }
    body = builders.experiment(
        name,
        "ns",
        objective_spec=objective,
        collector=None,
        algorithm=algorithm,
        trial_spec=trial_spec if trial_spec is not None else JOB,
        **{k: v for k, v in spec.items() if v is not None},
    )
    body["metadata"]["uid"] = "uid-1"
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
