"""Pods the API server refuses fail the Trial (issue 13, defect 5): a ValidatingAdmissionPolicy
refuses the pods of one Job; the Job controller only records FailedCreate Events and retries, so
without the Event informer the Trial stayed Running for ever. The controller runs with the
shipped ClusterRole, so its right to read Events is tested too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubetune.kube import JOBS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import conditions_of, is_true, job_succeeded
from kubetune_testkit.policies import refusing_pods
from kubetune_testkit.standins.services import observe
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration
REFUSAL = "pods of the Job named refused are not allowed in this namespace"


@pytest.fixture
def refusing_policy(kube: Kube, namespace: str) -> Iterator[None]:
    """Refuse, in the test namespace only, the pods of the Job named `refused` (a Job whose
    first pod came before the policy took effect would simply run: wait until it refuses)."""
    expression = (
        "!has(object.metadata.labels) || !('job-name' in object.metadata.labels) || "
        "object.metadata.labels['job-name'] != 'refused'"
    )
    with refusing_pods(kube, namespace, expression, REFUSAL, {"job-name": "refused"}):
        yield


def test_refused_pods_fail_the_trial_with_the_refusal(
    kube: Kube,
    namespace: str,
    controller: Any,
    limited_kubeconfig: str,
    refusing_policy: None,
) -> None:
    controller(kubeconfig=limited_kubeconfig)
    kube.create(TRIALS, trial("refused", batch_job("true")), namespace)
    kube.create(TRIALS, trial("admitted", batch_job("true")), namespace)

    done = wait_for(
        "the refused Trial Failed",
        lambda: is_true(t := kube.get_or_none(TRIALS, "refused", namespace), "Failed") and t,
        90,
    )
    failed = conditions_of(done)["Failed"]
    assert failed["reason"] == "TrialFailed. Job reason: FailedCreate"
    assert failed["message"].startswith("Trial has failed. Job message: the pods of Job refused")
    assert REFUSAL in failed["message"]
    assert done["status"]["completionTime"]
    # (the refusal may come before the first status write, so Running may never have been set)
    assert conditions_of(done).get("Running", {}).get("status", "False") == "False"

    # Its neighbour, whose pods are admitted, is not touched by the other job's refusals.
    wait_for(
        "the admitted job complete",
        lambda: job_succeeded(kube.get_or_none(JOBS, "admitted", namespace)),
        90,
    )
    observe(kube, namespace, "admitted", "0.5")
    wait_for("Succeeded", lambda: is_true(kube.get(TRIALS, "admitted", namespace), "Succeeded"))
    assert not is_true(kube.get(TRIALS, "admitted", namespace), "Failed")
