"""Pods the API server refuses fail the Trial (issue 13, defect 5): a ValidatingAdmissionPolicy
refuses the pods of one Job; the Job controller only records FailedCreate Events and retries, so
without the Event informer the Trial stayed Running for ever. The controller runs with the
shipped ClusterRole, so its right to read Events is tested too."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from kubetune import errors
from kubetune.kube import (
    EVENTS,
    JOBS,
    PODS,
    TRIALS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
)
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import conditions_of, is_true, job_succeeded
from kubetune_testkit.policies import refusing_pods
from kubetune_testkit.standins.services import observe
from kubetune_testkit.waiting import wait_for
from kubetune_trial_controller import refusals

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
    with refusing_pods(kube, namespace, expression, REFUSAL):
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


OUTAGE = "outage"


def _webhook_down(kube: Kube, namespace: str) -> bool:
    """Whether a server-side dry run of the outage Job's pod fails calling the webhook."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "outage-probe", "labels": {"job-name": OUTAGE}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]},
    }
    try:
        kube.create(PODS, pod, namespace, dry_run=True)
    except errors.ApiError as e:
        return "failed calling webhook" in str(e)
    return False


@contextlib.contextmanager
def webhook_outage(kube: Kube, namespace: str) -> Iterator[None]:
    """A fail-closed webhook for the pods of the Job named `outage`, whose endpoint nothing
    listens on: each of those pods is refused with "failed calling webhook" until it is gone."""
    name = f"kubetune-test-outage-{namespace}"
    kube.create(
        VALIDATING_WEBHOOK_CONFIGURATIONS,
        {
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "outage.kubetune.test",
                    "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 2,
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "objectSelector": {"matchLabels": {"job-name": OUTAGE}},
                }
            ],
        },
    )
    try:
        wait_for("the webhook outage", lambda: _webhook_down(kube, namespace))
        yield
    finally:
        with contextlib.suppress(errors.NotFound):
            kube.delete(VALIDATING_WEBHOOK_CONFIGURATIONS, name)


def _refusals(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return [
        e
        for e in kube.list_all(EVENTS, namespace)
        if e.get("reason") == "FailedCreate" and e["involvedObject"].get("name") == OUTAGE
    ]


@pytest.mark.timeout(900)  # the Job controller retries after 10 s, 20 s, 40 s, 80 s...
def test_a_webhook_outage_leaves_the_trial_waiting(
    kube: Kube, namespace: str, controller: Any
) -> None:
    """Pods refused because the API server cannot call a webhook say nothing of the pods: the
    Trial stays Running however many times they are refused, and ends when the webhook is
    back (here: gone)."""
    controller()
    with webhook_outage(kube, namespace):
        kube.create(TRIALS, trial(OUTAGE, batch_job("true")), namespace)
        refused = wait_for(
            f"more than {refusals.PERSISTENT_COUNT} refusals",
            lambda: (
                (found := _refusals(kube, namespace))
                and sum(int(e.get("count") or 1) for e in found) > refusals.PERSISTENT_COUNT
                and found
            ),
            300,
        )
        assert all("failed calling webhook" in e["message"] for e in refused)
        # (the old rule failed the Trial at the third refusal; once Failed it stays Failed,
        # so the end below decides whatever the informer had seen by now)
        assert not is_true(kube.get(TRIALS, OUTAGE, namespace), "Failed")
    wait_for(
        "the job complete once the webhook is gone",
        lambda: job_succeeded(kube.get_or_none(JOBS, OUTAGE, namespace)),
        300,
    )
    observe(kube, namespace, OUTAGE, "0.5")
    done = wait_for(
        "Succeeded", lambda: is_true(t := kube.get(TRIALS, OUTAGE, namespace), "Succeeded") and t
    )
    assert not is_true(done, "Failed")
