"""What the controller does with what the collector reports (the test writes as the collector):
an EarlyStopped condition, and no observation at all."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import JOBS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import conditions_of, is_true
from kubetune_testkit.standins.services import observe
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


def _early_stop(kube: Kube, namespace: str, name: str) -> None:
    """As the collector does: read the Trial, append EarlyStopped, patch with that version."""
    current = kube.get(TRIALS, name, namespace)
    conds = [
        *current["status"]["conditions"],
        {
            "type": "EarlyStopped",
            "status": "True",
            "reason": "TrialEarlyStopped",
            "message": "Trial is early stopped",
        },
    ]
    kube.patch(
        TRIALS,
        name,
        {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "status": {"conditions": conds},
        },
        namespace,
        subresource="status",
    )


@pytest.mark.parametrize(
    ("accuracy", "last"), [("0.3", "EarlyStopped"), (None, "MetricsUnavailable")]
)
def test_early_stopped_by_the_collector(
    kube: Kube, namespace: str, controller: Any, accuracy: str | None, last: str
) -> None:
    controller()
    kube.create(TRIALS, trial("es", batch_job("sleep 1"), retain=False), namespace)
    wait_for("Running", lambda: is_true(kube.get(TRIALS, "es", namespace), "Running"))
    observe(kube, namespace, "es", accuracy)
    _early_stop(kube, namespace, "es")
    done = wait_for(
        f"{last} last",
        lambda: (
            (t := kube.get(TRIALS, "es", namespace))["status"]["conditions"][-1]["type"] == last
            and t
        ),
    )
    assert is_true(done, "EarlyStopped") and not is_true(done, "Succeeded")
    # EarlyStopped is a completion: retain false deletes the job.
    wait_for("job deleted", lambda: kube.get_or_none(JOBS, "es", namespace) is None, 60)
    assert conditions_of(kube.get(TRIALS, "es", namespace)).keys() == (
        {"Created", "Running", "EarlyStopped"} | ({last} if last != "EarlyStopped" else set())
    )


def test_no_observation_within_the_timeout_is_metrics_unavailable(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller("--metrics-timeout", "3")
    kube.create(TRIALS, trial("mute", batch_job("true")), namespace)
    done = wait_for(
        "MetricsUnavailable",
        lambda: is_true(t := kube.get(TRIALS, "mute", namespace), "MetricsUnavailable") and t,
        90,
    )
    message = conditions_of(done)["MetricsUnavailable"]["message"]
    assert "no observation was reported within 3s" in message
    assert conditions_of(done)["Running"]["status"] == "False"
