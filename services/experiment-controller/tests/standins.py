"""Helpers of the integration tests: the controller in-process, and the stand-ins.

The suggestion-algorithm and the trial-controller are other services; here the test plays them
(`StandInAlgorithm` writes assignments into the Suggestion status the way the contract says,
`set_trial` writes Trial status conditions and observations), so each test decides exactly when
an assignment appears and how each trial ends.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

from kubetune import errors, naming
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS, Kube, Obj
from kubetune.runtime import running
from kubetune_experiment_controller import main


class RunningController:
    """The controller in a thread of the test process, watching one namespace."""

    def __init__(self, kube: Kube, namespace: str, max_listed: int = 1000) -> None:
        args = main.parser().parse_args(
            [
                "--no-leader-elect",
                "--probe-port=0",
                "--probe-address=127.0.0.1",
                f"--watch-namespace={namespace}",
                f"--max-listed-trials={max_listed}",
            ]
        )
        controller = main.build(args)
        self.process = running.Process(kube, [controller], args)
        self.thread = threading.Thread(target=self.process.run, daemon=True)

    def start(self) -> RunningController:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.process.stop.set()
        self.thread.join(30)


def wait_for(
    what: str, probe: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1
) -> Any:
    """Poll `probe` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


JOB_TEMPLATE: dict[str, Any] = {
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


def experiment_manifest(
    name: str,
    namespace: str,
    *,
    max_trials: int | None = 6,
    parallel: int = 3,
    max_failed: int | None = None,
    goal: float | None = None,
    resume: str = "Never",
    trial_spec: dict[str, Any] | None = None,
) -> Obj:
    objective: dict[str, Any] = {
        "type": "maximize",
        "objectiveMetricName": "accuracy",
        "metricStrategies": [{"name": "accuracy", "value": "max"}],
    }
    if goal is not None:
        objective["goal"] = goal
    spec: dict[str, Any] = {
        "objective": objective,
        "algorithm": {"algorithmName": "random"},
        "parallelTrialCount": parallel,
        "resumePolicy": resume,
        "parameters": [
            {
                "name": "lr",
                "parameterType": "double",
                "feasibleSpace": {"min": "0.01", "max": "0.1"},
            }
        ],
        "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
        "trialTemplate": {
            "primaryContainerName": "training-container",
            "trialParameters": [{"name": "learningRate", "reference": "lr"}],
            "trialSpec": copy.deepcopy(trial_spec if trial_spec is not None else JOB_TEMPLATE),
        },
    }
    if max_trials is not None:
        spec["maxTrialCount"] = max_trials
    if max_failed is not None:
        spec["maxFailedTrialCount"] = max_failed
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "ml"}},
        "spec": spec,
    }


class StandInAlgorithm:
    """Stands in for the suggestion-algorithm: appends assignments up to `spec.requests`.

    Names follow the contract (`naming.trial_name(experiment, index)`), written in one patch
    with `suggestionCount`, guarded by the resourceVersion. `extra` hands out more than
    requested, to check that the controller never creates more than it may.
    """

    def __init__(self, kube: Kube, namespace: str, experiment: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.experiment = experiment

    def suggestion(self) -> Obj | None:
        return self.kube.get_or_none(SUGGESTIONS, self.experiment, self.namespace)

    def fulfil(self, extra: int = 0) -> int:
        """Fill the assignments up to requests (+extra); returns how many there are."""
        while True:
            suggestion = self.suggestion()
            if suggestion is None:
                return 0
            status = suggestion.get("status") or {}
            current = list(status.get("suggestions") or [])
            wanted = int((suggestion.get("spec") or {}).get("requests") or 0) + extra
            if len(current) >= wanted:
                return len(current)
            for index in range(len(current), wanted):
                current.append(
                    {
                        "name": naming.trial_name(self.experiment, str(index)),
                        "parameterAssignments": [{"name": "lr", "value": f"0.0{index % 9 + 1}"}],
                    }
                )
            try:
                self.kube.patch(
                    SUGGESTIONS,
                    self.experiment,
                    {
                        "metadata": {"resourceVersion": suggestion["metadata"]["resourceVersion"]},
                        "status": {"suggestions": current, "suggestionCount": len(current)},
                    },
                    self.namespace,
                    subresource="status",
                )
                return len(current)
            except errors.Conflict:
                continue

    def set_conditions(self, conditions: list[Obj], **extra: Any) -> None:
        suggestion = self.suggestion()
        assert suggestion is not None
        status = {"conditions": conditions, **extra}
        self.kube.patch(
            SUGGESTIONS, self.experiment, {"status": status}, self.namespace, subresource="status"
        )


def set_trial(
    kube: Kube, namespace: str, name: str, state: str, accuracy: float | None = None
) -> None:
    """Stands in for the trial-controller and the collector: conditions and observation."""
    now = "2026-01-01T00:00:00Z"
    conditions = [
        {"type": "Created", "status": "True", "reason": "TrialCreated", "lastUpdateTime": now},
    ]
    if state != "Created":
        conditions.append(
            {"type": state, "status": "True", "reason": f"Trial{state}", "lastUpdateTime": now}
        )
    status: dict[str, Any] = {"conditions": conditions}
    if accuracy is not None:
        value = str(accuracy)
        status["observation"] = {
            "metrics": [{"name": "accuracy", "min": value, "max": value, "latest": value}]
        }
    kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")


def trials_of(kube: Kube, namespace: str, experiment: str) -> list[Obj]:
    return kube.list_all(
        TRIALS, namespace, label_selector=f"{naming.LABEL_EXPERIMENT}={experiment}"
    )


def experiment_status(kube: Kube, namespace: str, name: str) -> Obj:
    return (kube.get(EXPERIMENTS, name, namespace).get("status")) or {}


def last_condition(kube: Kube, namespace: str, name: str) -> tuple[str, str, str] | None:
    conditions = experiment_status(kube, namespace, name).get("conditions") or []
    if not conditions:
        return None
    last = conditions[-1]
    return (last["type"], last["status"], last.get("reason", ""))
