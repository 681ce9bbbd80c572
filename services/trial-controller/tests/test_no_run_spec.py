"""A Trial without runSpec: the trial-controller, the one writer of Trial conditions, fails it
with a message its author can act on."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import TRIALS, Kube
from kubetune_testkit.builders import trial
from kubetune_testkit.conditions import conditions_of, is_true
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

REASON = "TrialFailed. Job reason: InvalidRunSpec"


def _failed(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = wait_for(
        f"{name} Failed",
        lambda: is_true(t := kube.get_or_none(TRIALS, name, namespace), "Failed") and t,
    )
    return conditions_of(found)["Failed"]


def test_the_render_error_the_experiment_controller_left_is_the_failure_message(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller()
    body = trial("unrendered")
    del body["spec"]["runSpec"]
    reason = (
        "Trial template could not be rendered: unresolved placeholder(s) ${trialParameters.x}: "
        "not declared in trialParameters; declare each in spec.trialTemplate.trialParameters "
        "or remove it from the template"
    )
    body["metadata"]["annotations"] = {naming.ANNOTATION_RENDER_ERROR: reason}
    kube.create(TRIALS, body, namespace)
    failed = _failed(kube, namespace, "unrendered")
    assert failed["reason"] == REASON
    assert failed["message"] == f"Trial has failed. Job message: {reason}"


def test_a_trial_made_without_run_spec_is_told_to_set_it(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller()
    body = trial("handmade")
    del body["spec"]["runSpec"]
    kube.create(TRIALS, body, namespace)
    failed = _failed(kube, namespace, "handmade")
    assert failed["reason"] == REASON
    assert "set spec.runSpec to the job to run" in failed["message"], failed["message"]
