"""What a Trial teaches the study follows the Trial's one state (kubetune.conditions.trial_state).

The algorithm used to look at EarlyStopped first and Succeeded second, so a Trial the
experiment-controller counts Killed or Failed could teach the study its value as a success, and
one it counts Running (Running and MetricsUnavailable both true) was told as a failure.
"""

from __future__ import annotations

import pytest

from kubetune.api.experiment import Experiment
from kubetune.api.trial import Trial
from kubetune_suggestion_algorithm import syncing
from kubetune_suggestion_algorithm.outcomes import Outcome

OBJECTIVE = {"type": "minimize", "objectiveMetricName": "loss"}
EXPERIMENT = Experiment.model_validate(
    {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": "e"},
        "spec": {"objective": OBJECTIVE},
    }
)


def _trial(types: list[str], value: str | None = "0.5") -> Trial:
    metrics = [{"name": "loss", "min": value, "max": value, "latest": value}] if value else []
    return Trial.model_validate(
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": "t"},
            "spec": {"objective": OBJECTIVE},
            "status": {
                "conditions": [{"type": t, "status": "True"} for t in types],
                "observation": {"metrics": metrics},
            },
        }
    )


@pytest.mark.parametrize(
    ("types", "value", "expected"),
    [
        (["Created"], "0.5", None),
        (["Created", "Running"], "0.5", None),
        (["Succeeded"], "0.5", Outcome(0.5)),
        (["Succeeded"], None, Outcome(None)),
        (["EarlyStopped"], "0.5", Outcome(0.5)),
        (["EarlyStopped"], None, None),
        (["EarlyStopped", "MetricsUnavailable"], None, None),
        (["Failed"], "0.5", Outcome(None)),
        (["MetricsUnavailable"], None, Outcome(None)),
        # the cases the algorithm and the experiment-controller disagreed on
        (["EarlyStopped", "Killed"], "0.5", Outcome(None)),
        (["Succeeded", "Failed"], "0.5", Outcome(None)),
        (["Running", "MetricsUnavailable"], None, None),
    ],
)
def test_outcome_follows_the_trial_state(
    types: list[str], value: str | None, expected: Outcome | None
) -> None:
    assert syncing.outcome(EXPERIMENT, _trial(types, value)) == expected
