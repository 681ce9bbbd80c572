"""The CLI says a Trial's state as the experiment-controller counts it (kubetune.conditions).

It used to show the last true condition, so a listing disagreed with the Experiment's counts:
a Trial only Created was "Created" (counted Pending), an EarlyStopped Trial that later became
MetricsUnavailable was "MetricsUnavailable" (counted EarlyStopped).
"""

from __future__ import annotations

import pytest
from kubetune_cli.reading import state_of

from kubetune import conditions
from kubetune.api.trial import Trial


def _trial(pairs: list[tuple[str, str]]) -> Trial:
    return Trial.model_validate(
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": "t"},
            "spec": {},
            "status": {"conditions": [{"type": t, "status": s} for t, s in pairs]},
        }
    )


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([("Created", "True")], "Pending"),
        (
            [("Running", "True"), ("EarlyStopped", "True"), ("MetricsUnavailable", "True")],
            "EarlyStopped",
        ),
        ([("Failed", "True"), ("Killed", "True")], "Killed"),
        ([("Killed", "True"), ("Failed", "True")], "Killed"),
        ([("Running", "True"), ("MetricsUnavailable", "True")], "Running"),
        ([("Created", "True"), ("Running", "False"), ("Succeeded", "True")], "Succeeded"),
    ],
)
def test_the_cli_state_is_the_controllers_state(
    pairs: list[tuple[str, str]], expected: str
) -> None:
    trial = _trial(pairs)
    assert state_of(trial) == expected
    assert state_of(trial) == conditions.trial_state(
        trial.status.conditions if trial.status else None
    )
