"""Pods the API server refuses fail the Trial (issue 13, defect 5): a ValidatingAdmissionPolicy
refuses the pods of one Job; the Job controller only records FailedCreate Events and retries, so
without the Event informer the Trial stayed Running for ever. The controller runs with the
shipped ClusterRole, so its right to read Events is tested too."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import batch_job, conditions_of, is_true, observe, trial, wait_for

from kubetune import errors
from kubetune.kube import JOBS, PODS, TRIALS, Kube, Resource

pytestmark = pytest.mark.integration
POLICIES = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    False,
)
BINDINGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    False,
)
REFUSAL = "pods of the Job named refused are not allowed in this namespace"


@pytest.fixture
def refusing_policy(kube: Kube, namespace: str) -> Iterator[None]:
    """Refuse, in the test namespace only, the pods of the Job named `refused`."""
    name = f"refuse-{namespace}"
    kube.create(
        POLICIES,
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "!has(object.metadata.labels) || "
                        "!('job-name' in object.metadata.labels) || "
                        "object.metadata.labels['job-name'] != 'refused'",
                        "message": REFUSAL,
                    }
                ],
            },
        },
    )
    kube.create(
        BINDINGS,
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    )
    try:
        # The API server loads a new policy within a second or so (longer on a busy machine);
        # a Job whose first pod came before it would simply run. Wait until it refuses.
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "policy-probe", "labels": {"job-name": "refused"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]},
        }
        wait_for("the refusing policy to take effect", lambda: _refused(kube, namespace, probe), 60)
        yield
    finally:
        for resource in (BINDINGS, POLICIES):
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, name)


def _refused(kube: Kube, namespace: str, pod: dict[str, Any]) -> bool:
    """Whether a server-side dry run of `pod` is refused by the policy (nothing is stored)."""
    try:
        kube.create(PODS, pod, namespace, dry_run=True)
    except errors.ApiError as e:
        return REFUSAL in str(e)
    return False


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
        lambda: (
            (kube.get_or_none(JOBS, "admitted", namespace) or {}).get("status", {}).get("succeeded")
        ),
        90,
    )
    observe(kube, namespace, "admitted", "0.5")
    wait_for("Succeeded", lambda: is_true(kube.get(TRIALS, "admitted", namespace), "Succeeded"))
    assert not is_true(kube.get(TRIALS, "admitted", namespace), "Failed")
