"""A Trial too large to store fails with the cause instead of being retried for ever (issue 13,
defect 7): the template repeats a long parameter value until the rendered Trial is ~2 MB, above
etcd's 1.5 MiB request limit. The API server answers 500 `etcdserver: request is too large`,
which on main made every reconcile fail again with nothing on the Experiment."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import EVENTS, EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit.builders import trial_job
from kubetune_testkit.standins.services import set_trial
from kubetune_testkit.waiting import wait_for
from tests.standins import RunningController, experiment_manifest, last_condition

pytestmark = pytest.mark.integration
REPEATS = 2000
LONG_VALUE = "0." + "1" * 1000


def test_a_trial_too_large_to_store_fails_and_shows_why(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    command = ["echo", " ".join(["${trialParameters.learningRate}"] * REPEATS)]
    manifest = experiment_manifest(
        "huge", namespace, max_trials=2, parallel=1, max_failed=1, trial_spec=trial_job(command)
    )
    kube.create(EXPERIMENTS, manifest, namespace)
    suggestion = wait_for(
        "the Suggestion", lambda: kube.get_or_none(SUGGESTIONS, "huge", namespace)
    )
    name = naming.trial_name("huge", "0")
    kube.patch(
        SUGGESTIONS,
        "huge",
        {
            "metadata": {"resourceVersion": suggestion["metadata"]["resourceVersion"]},
            "status": {
                "suggestions": [
                    {"name": name, "parameterAssignments": [{"name": "lr", "value": LONG_VALUE}]}
                ],
                "suggestionCount": 1,
            },
        },
        namespace,
        subresource="status",
    )

    # The Trial is created without runSpec and carries the cause for the trial-controller,
    # the only writer of Trial conditions (not running here: a stand-in writes its Failed).
    def unrendered() -> dict[str, Any] | None:
        trial = kube.get_or_none(TRIALS, name, namespace)
        annotations = ((trial or {}).get("metadata") or {}).get("annotations") or {}
        return trial if naming.ANNOTATION_RENDER_ERROR in annotations else None

    trial = wait_for("the Trial created without runSpec", unrendered, timeout=60)
    message = trial["metadata"]["annotations"][naming.ANNOTATION_RENDER_ERROR]
    assert message.startswith("Trial could not be created: it is "), message
    assert "too large" in message and "shorten the template" in message
    assert "runSpec" not in trial["spec"]
    assert not trial.get("status")
    set_trial(kube, namespace, name, "Failed")
    wait_for(
        "the Experiment failed (maxFailedTrialCount 1)",
        lambda: last_condition(kube, namespace, "huge") == ("Failed", "True", "ExperimentFailed"),
    )
    events = [
        e
        for e in kube.list_all(EVENTS, namespace)
        if e.get("reason") == "ObjectTooLarge" and e["involvedObject"]["name"] == "huge"
    ]
    assert events and events[0]["type"] == "Warning" and name in events[0]["message"]
