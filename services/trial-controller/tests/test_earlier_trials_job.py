"""A Trial recreated under the name of a deleted one waits for the old Trial's job to go.

An Experiment recreates a deleted Trial under the same name when its Suggestion still holds the
assignment whole (after a take-over from Katib, whose Suggestion keeps every assignment): the
old Trial's job is then still there until the garbage collector deletes it. It must not fail
the new Trial as `JobNotOwned`. A finalizer on the old job keeps it for as long as the test
needs, as a busy garbage collector would.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import JOBS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import is_true
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

HOLD = "example.com/hold"


def test_a_trial_waits_for_the_job_of_an_earlier_trial_of_its_name(
    kube: Kube, namespace: str, controller: Any, limited_kubeconfig: str
) -> None:
    earlier = batch_job("sleep 600", name="reborn")
    earlier["metadata"]["finalizers"] = [HOLD]
    earlier["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "name": "reborn",
            "uid": "00000000-0000-0000-0000-00000000dead",  # the deleted Trial's
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    kube.create(JOBS, earlier, namespace)
    kube.create(TRIALS, trial("reborn", batch_job("true")), namespace)
    handle = controller(kubeconfig=limited_kubeconfig)
    wait_for(
        "the controller waiting for the earlier job (or failing the Trial)",
        lambda: (
            "of an earlier Trial of this name is deleted" in handle.output()
            or is_true(kube.get(TRIALS, "reborn", namespace), "Failed")
        ),
        60,
    )
    failed = kube.get(TRIALS, "reborn", namespace)
    assert not is_true(failed, "Failed"), failed["status"]["conditions"]
    wait_for(
        "the garbage collector deleting the earlier job",
        lambda: kube.get(JOBS, "reborn", namespace)["metadata"].get("deletionTimestamp"),
        60,
    )
    kube.patch(JOBS, "reborn", {"metadata": {"finalizers": None}}, namespace)

    uid = kube.get(TRIALS, "reborn", namespace)["metadata"]["uid"]
    job = wait_for(
        "the Trial's own Job",
        lambda: (
            (j := kube.get_or_none(JOBS, "reborn", namespace))
            and j["metadata"]["ownerReferences"][0]["uid"] == uid
            and j
        ),
        60,
    )
    assert job["metadata"]["ownerReferences"][0]["name"] == "reborn"
    running = wait_for(
        "the Trial Running on it",
        lambda: (t := kube.get(TRIALS, "reborn", namespace)) and is_true(t, "Running") and t,
        60,
    )
    assert not is_true(running, "Failed")
