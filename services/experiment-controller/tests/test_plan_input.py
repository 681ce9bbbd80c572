"""Which Trial updates wake the Experiment (`summaries.plan_input_changed`), on the cached
form the Trial informer keeps (`summaries.cached`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetune import naming
from kubetune_experiment_controller.summaries import cached, plan_input_changed


def _trial(state: str | None = None, accuracy: str | None = None, rv: str = "1") -> dict[str, Any]:
    conditions = [{"type": "Created", "status": "True"}]
    if state is not None:
        conditions.append({"type": state, "status": "True", "reason": f"Trial{state}"})
    status: dict[str, Any] = {"conditions": conditions}
    if accuracy is not None:
        metric = {"name": "accuracy", "min": accuracy, "max": accuracy, "latest": accuracy}
        status["observation"] = {"metrics": [metric]}
    return {
        "metadata": {
            "name": "exp-1",
            "namespace": "ns",
            "resourceVersion": rv,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {naming.LABEL_EXPERIMENT: "exp"},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1beta1",
                    "kind": "Experiment",
                    "name": "exp",
                    "controller": True,
                }
            ],
        },
        "spec": {"parameterAssignments": [{"name": "lr", "value": "0.1"}]},
        "status": status,
    }


def _changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return plan_input_changed(cached(old), cached(new))


def test_an_interim_report_on_a_running_trial_changes_nothing_a_plan_reads() -> None:
    assert not _changed(_trial("Running", "0.1"), _trial("Running", "0.2", rv="2"))
    assert not _changed(_trial("Running"), _trial("Running", "0.1", rv="2"))
    # A reason or a message that leaves the state as it was: the plan reads the state.
    reworded = _trial("Running", rv="2")
    reworded["status"]["conditions"][-1]["reason"] = "Waiting"
    assert not _changed(_trial("Running"), reworded)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (_trial(), _trial("Running", rv="2")),
        (_trial("Running", "0.4"), _trial("Succeeded", "0.4", rv="2")),
        (_trial("Running", "0.4"), _trial("Failed", "0.4", rv="2")),
        (_trial("Succeeded", "0.4"), _trial("Succeeded", "0.5", rv="2")),
        (_trial("EarlyStopped", "0.4"), _trial("EarlyStopped", "0.5", rv="2")),
    ],
    ids=["running", "succeeded", "failed", "final-observation", "early-stopped-observation"],
)
def test_state_and_final_observation_changes_wake_the_experiment(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert _changed(old, new)


def test_a_changed_experiment_label_or_owner_wakes_the_experiment() -> None:
    relabelled = _trial("Running", rv="2")
    relabelled["metadata"]["labels"][naming.LABEL_EXPERIMENT] = "other"
    assert _changed(_trial("Running"), relabelled)
    orphaned = copy.deepcopy(_trial("Running", rv="2"))
    orphaned["metadata"]["ownerReferences"] = []
    assert _changed(_trial("Running"), orphaned)
