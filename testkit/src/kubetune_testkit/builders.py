"""Experiments, Suggestions, Trials and Jobs as the dicts a user (or a service) would write.

Every builder gives a small valid object with one learning-rate parameter `lr` and the metric
`accuracy` maximized unless told otherwise; keywords change what a test is about, and
`**spec` sets any other field of the spec, so a test shows only what matters to it.
"""

from __future__ import annotations

import copy
from typing import Any

from kubetune import naming

Obj = dict[str, Any]
API_VERSION = "kubeflow.org/v1beta1"
CONTAINER = "training-container"
LR = {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}}
JOB_CONDITIONS = {
    "successCondition": 'status.conditions.#(type=="Complete")#|#(status=="True")#',
    "failureCondition": 'status.conditions.#(type=="Failed")#|#(status=="True")#',
}
"""A batch Job's success and failure conditions, as the webhook defaults them."""


def categorical(name: str, values: list[str]) -> Obj:
    """A categorical parameter."""
    return {"name": name, "parameterType": "categorical", "feasibleSpace": {"list": values}}


def references(**parameters: str) -> list[Obj]:
    """trialParameters: `references(learningRate="lr")` names `${trialParameters.learningRate}`."""
    return [{"name": name, "reference": ref} for name, ref in parameters.items()]


def objective(
    metric: str = "accuracy",
    kind: str = "maximize",
    *,
    strategies: bool = True,
    additional: list[str] | None = None,
    goal: float | None = None,
) -> Obj:
    """An objective spec; `strategies` adds the metric strategy the defaulter would."""
    spec: Obj = {"type": kind, "objectiveMetricName": metric}
    if strategies:
        spec["metricStrategies"] = [
            {"name": metric, "value": "max" if kind == "maximize" else "min"}
        ]
    if additional is not None:
        spec["additionalMetricNames"] = additional
    if goal is not None:
        spec["goal"] = goal
    return spec


def pod_spec(command: list[str], *, container: str = CONTAINER, image: str = "busybox") -> Obj:
    """A pod spec of one container that runs `command` and is never restarted."""
    return {
        "restartPolicy": "Never",
        "containers": [{"name": container, "image": image, "command": command}],
    }


def batch_job(
    command: list[str] | str,
    *,
    container: str = CONTAINER,
    image: str = "busybox",
    service_account: str | None = None,
    name: str | None = None,
    backoff_limit: int | None = 0,
) -> Obj:
    """A batch/v1 Job; a string command runs in `sh -c` (the node agent runs it on the host)."""
    argv = ["sh", "-c", command] if isinstance(command, str) else command
    pod = pod_spec(argv, container=container, image=image)
    if service_account:
        pod["serviceAccountName"] = service_account
    spec: Obj = {"template": {"spec": pod}}
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name} if name else {},
        "spec": spec,
    }


def trial_job(command: list[str] | None = None, **options: Any) -> Obj:
    """The Job template of an Experiment: its command uses `${trialParameters.learningRate}`."""
    argv = command or ["sh", "-c", "echo lr=${trialParameters.learningRate}"]
    options.setdefault("backoff_limit", None)
    body = batch_job(argv, **options)
    del body["metadata"]
    return body


def algorithm_spec(algorithm: str | Obj, settings: dict[str, str] | None = None) -> Obj:
    """`{"algorithmName": ..., "algorithmSettings": [...]}` from a name (or a whole spec)."""
    if not isinstance(algorithm, str):
        return copy.deepcopy(algorithm)
    spec: Obj = {"algorithmName": algorithm}
    if settings is not None:
        spec["algorithmSettings"] = [{"name": k, "value": v} for k, v in settings.items()]
    return spec


def experiment(
    name: str = "exp",
    namespace: str | None = None,
    *,
    objective_spec: Obj | None = None,
    algorithm: str | Obj = "random",
    parameters: list[Obj] | None = None,
    trial_parameters: list[Obj] | None = None,
    trial_spec: Obj | None = None,
    primary_container: str = CONTAINER,
    collector: str | None = "StdOut",
    labels: dict[str, str] | None = None,
    conditions: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    """An Experiment; `conditions` go to the trial template (e.g. `JOB_CONDITIONS`); `spec`
    keywords are spec fields by their JSON name (`maxTrialCount=6`)."""
    body_spec: Obj = {
        "objective": objective_spec if objective_spec is not None else objective(),
        "algorithm": algorithm_spec(algorithm),
        "parameters": copy.deepcopy(parameters if parameters is not None else [LR]),
    }
    if collector is not None:
        body_spec["metricsCollectorSpec"] = {"collector": {"kind": collector}}
    body_spec["trialTemplate"] = {
        "primaryContainerName": primary_container,
        "trialParameters": trial_parameters
        if trial_parameters is not None
        else references(learningRate="lr"),
        "trialSpec": copy.deepcopy(trial_spec if trial_spec is not None else trial_job()),
        **(conditions or {}),
    }
    body_spec.update(spec)
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": API_VERSION,
        "kind": "Experiment",
        "metadata": metadata,
        "spec": body_spec,
    }


def trial(
    name: str,
    run_spec: Obj | None = None,
    *,
    experiment: str = "exp",
    objective_spec: Obj | None = None,
    collector: str = "StdOut",
    primary_container: str = CONTAINER,
    assignments: dict[str, str] | None = None,
    retain: bool = True,
    success: str | None = None,
    failure: str | None = None,
    **spec: Any,
) -> Obj:
    """A Trial of `experiment` (labelled so) with `lr=0.1` assigned; its run is retained (a
    test can read it after the end). `spec` keywords are other spec fields by JSON name."""
    body_spec: Obj = {
        "objective": objective_spec if objective_spec is not None else objective(),
        "parameterAssignments": [
            {"name": k, "value": v} for k, v in (assignments or {"lr": "0.1"}).items()
        ],
        "runSpec": run_spec if run_spec is not None else {"apiVersion": "batch/v1", "kind": "Job"},
        "retainRun": retain,
        "metricsCollector": {"collector": {"kind": collector}},
        "primaryContainerName": primary_container,
    }
    if success is not None:
        body_spec["successCondition"] = success
    if failure is not None:
        body_spec["failureCondition"] = failure
    body_spec.update(spec)
    return {
        "apiVersion": API_VERSION,
        "kind": "Trial",
        "metadata": {"name": name, "labels": {naming.LABEL_EXPERIMENT: experiment}},
        "spec": body_spec,
    }


def suggestion(
    name: str = "exp",
    namespace: str | None = None,
    *,
    algorithm: str | Obj = "random",
    requests: int = 0,
    resume: str = "Never",
    owner: Obj | None = None,
) -> Obj:
    """The Suggestion of Experiment `name` as the experiment-controller writes it (same name,
    its labels, owned by the Experiment when `owner` is the stored Experiment)."""
    metadata: Obj = {"name": name, "labels": naming.experiment_labels(name)}
    if namespace is not None:
        metadata["namespace"] = namespace
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner)]
    return {
        "apiVersion": API_VERSION,
        "kind": "Suggestion",
        "metadata": metadata,
        "spec": {
            "algorithm": algorithm_spec(algorithm),
            "requests": requests,
            "resumePolicy": resume,
        },
    }


def metric(name: str, value: float | str) -> Obj:
    """One metric of an observation with the same min, max and latest."""
    text = str(value)
    return {"name": name, "min": text, "max": text, "latest": text}


def observation(value: float | str | None, name: str = "accuracy") -> Obj:
    """`status.observation` as the collector writes it (`unavailable` when there is none)."""
    return {"metrics": [metric(name, "unavailable" if value is None else value)]}


def owner_reference(owner: Obj, *, controller: bool = True) -> Obj:
    """An ownerReference to `owner` (an object read back from the API server), blocking its
    deletion as the references controllers write do."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }
