"""The Trial cache keeps a finished Trial small and a running one whole."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubetune.api.trial import Trial
from kubetune.runtime.watching import without_managed_fields
from kubetune_trial_controller import caching, deciding, kinds, main
from kubetune_trial_controller.building import is_owned_by

JOB_TEMPLATE = {"spec": {"template": {"spec": {"containers": [{"name": "t", "args": ["x"] * 50}]}}}}


def trial(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {
            "name": "t1",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": {"katib.kubeflow.org/experiment": "e"},
            "annotations": {"note": "n" * 1000},
            "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "parameterAssignments": [{"name": "lr", "value": "0.1"}],
            "runSpec": {"apiVersion": "batch/v1", "kind": "Job", **JOB_TEMPLATE},
            "retainRun": False,
        },
        "status": {
            "conditions": [{"type": t, "status": s, "reason": f"Trial{t}"} for t, s in conditions],
            "observation": {"metrics": [{"name": "loss", "latest": "0.1"}]},
        },
    }


def test_a_running_trial_is_kept_whole_but_for_managed_fields() -> None:
    """The informer drops managedFields (`without_managed_fields`), slim keeps the rest."""
    running = trial(("Created", "True"), ("Running", "True"))
    before = copy.deepcopy(running)
    cached = caching.slim(without_managed_fields(running))
    assert running == before  # the informer's object is not changed in place
    assert "managedFields" not in cached["metadata"]
    del before["metadata"]["managedFields"]
    assert cached == before


def test_an_early_stopped_trial_is_kept_whole_it_may_wait_for_its_observation() -> None:
    stopped = trial(("Created", "True"), ("Running", "False"), ("EarlyStopped", "True"))
    assert caching.slim(stopped)["spec"] == stopped["spec"]


def test_a_finished_trial_keeps_what_its_reconcile_reads_and_is_much_smaller() -> None:
    for final in ("Succeeded", "Failed", "MetricsUnavailable", "Killed"):
        full = trial(("Created", "True"), ("Running", "False"), (final, "True"))
        cached = caching.slim(full)
        parsed = Trial.model_validate(cached)
        assert not deciding.needs_job(parsed) and not deciding.awaiting_observation(parsed)
        assert parsed.spec.retain_run is False
        assert kinds.of_run_spec(cached["spec"]["runSpec"]) == kinds.of_run_spec(
            full["spec"]["runSpec"]
        )
        job = {"metadata": {"ownerReferences": [{"kind": "Trial", "uid": "u-1"}]}}
        assert is_owned_by(job, cached)
        assert cached["metadata"]["resourceVersion"] == "7"
        assert len(json.dumps(cached, default=dict)) * 4 < len(json.dumps(full)), final


def test_what_finished_trials_share_cannot_be_changed_through_one_of_them() -> None:
    one = caching.slim(trial(("Created", "True"), ("Succeeded", "True")))
    other = caching.slim(trial(("Created", "True"), ("Succeeded", "True")))
    assert one["status"] is other["status"]
    assert one["spec"]["runSpec"] is other["spec"]["runSpec"]
    with pytest.raises(TypeError):
        one["status"]["conditions"] = []
    with pytest.raises(TypeError):
        one["spec"]["runSpec"]["kind"] = "Widget"
    assert one["metadata"] is not other["metadata"]


def test_the_controller_caches_trials_slimmed() -> None:
    controller = main.build(main.parser().parse_args([]))
    (trials,) = [w for w in controller.watches if w.resource.kind == "Trial"]
    assert trials.transform is not None
    done = trial(("Created", "True"), ("Succeeded", "True"))
    assert trials.transform(done) == caching.slim(done)
