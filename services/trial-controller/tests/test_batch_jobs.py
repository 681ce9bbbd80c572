"""batch/v1 Job trials through the real job controller and the node agent; the test writes the
observation in place of the metrics collector."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from kubetune import errors
from kubetune.kube import JOBS, PODS, ROLE_BINDINGS, TRIALS, Kube, Resource
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import conditions_of, is_true
from kubetune_testkit.standins.services import observe
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


def _trial(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return kube.get_or_none(TRIALS, name, ns)


def test_job_succeeds_with_observation(kube: Kube, namespace: str, controller: Any) -> None:
    controller()
    kube.create(TRIALS, trial("ok", batch_job("echo accuracy=0.9"), retain=True), namespace)

    job = wait_for("the job", lambda: kube.get_or_none(JOBS, "ok", namespace))
    meta = job["metadata"]
    assert meta["labels"]["katib.kubeflow.org/trial"] == "ok"
    assert meta["labels"]["katib.kubeflow.org/experiment"] == "exp"
    (ref,) = [r for r in meta["ownerReferences"] if r.get("controller")]
    assert (ref["kind"], ref["name"]) == ("Trial", "ok")
    binding = kube.get(ROLE_BINDINGS, "kubetune-pns-collector", namespace)
    assert binding["roleRef"]["name"] == "kubetune-pns-collector"
    assert {"kind": "ServiceAccount", "name": "default", "namespace": namespace} in binding[
        "subjects"
    ]

    running = wait_for("Running", lambda: is_true(_trial(kube, namespace, "ok"), "Running"))
    assert running
    # The job completes; without an observation the Trial waits and says for what.
    waiting = wait_for(
        "waiting-for-metrics message",
        lambda: (
            "metrics collector"
            in conditions_of(_trial(kube, namespace, "ok")).get("Running", {}).get("message", "")
        ),
        90,
    )
    assert waiting
    assert not is_true(_trial(kube, namespace, "ok"), "Succeeded")

    observe(kube, namespace, "ok", "0.9")
    done = wait_for(
        "Succeeded", lambda: is_true(t := _trial(kube, namespace, "ok"), "Succeeded") and t
    )
    conds = conditions_of(done)
    assert conds["Succeeded"]["reason"].startswith("TrialSucceeded")
    assert conds["Succeeded"]["message"].startswith("Trial has succeeded")
    assert conds["Running"]["status"] == "False"
    assert [c["type"] for c in done["status"]["conditions"]][-1] == "Succeeded"
    assert done["status"]["startTime"] and done["status"]["completionTime"]
    # retain: true keeps the job.
    assert kube.get_or_none(JOBS, "ok", namespace) is not None


def test_job_fails(kube: Kube, namespace: str, controller: Any) -> None:
    controller()
    kube.create(TRIALS, trial("bad", batch_job("exit 3"), retain=False), namespace)
    done = wait_for(
        "Failed", lambda: is_true(t := _trial(kube, namespace, "bad"), "Failed") and t, 90
    )
    conds = conditions_of(done)
    assert conds["Failed"]["reason"].startswith("TrialFailed. Job reason: ")
    assert conds["Failed"]["message"].startswith("Trial has failed")
    assert not is_true(done, "Succeeded")
    # retain: false deletes the job, and its pods with it.
    wait_for("job deleted", lambda: kube.get_or_none(JOBS, "bad", namespace) is None, 60)
    wait_for(
        "pods deleted",
        lambda: not kube.list_all(PODS, namespace, label_selector="job-name=bad"),
        60,
    )


def test_succeeded_job_with_empty_observation_is_metrics_unavailable(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller()
    kube.create(TRIALS, trial("nometrics", batch_job("true")), namespace)
    wait_for(
        "job complete",
        lambda: any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (
                (kube.get_or_none(JOBS, "nometrics", namespace) or {}).get("status") or {}
            ).get("conditions", [])
        ),
        90,
    )
    observe(kube, namespace, "nometrics", None)  # the collector found no objective
    done = wait_for(
        "MetricsUnavailable",
        lambda: is_true(t := _trial(kube, namespace, "nometrics"), "MetricsUnavailable") and t,
    )
    assert conditions_of(done)["MetricsUnavailable"]["message"].startswith(
        "Metrics are not available"
    )
    assert not is_true(done, "Succeeded")


def test_push_collector_without_metrics_gets_unavailable_observation(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller()
    kube.create(TRIALS, trial("push", batch_job("true"), collector="Push"), namespace)
    done = wait_for(
        "MetricsUnavailable",
        lambda: is_true(t := _trial(kube, namespace, "push"), "MetricsUnavailable") and t,
        90,
    )
    (metric,) = done["status"]["observation"]["metrics"]
    assert metric["name"] == "accuracy" and metric["latest"] == "unavailable"


def _decide_job(kube: Kube, ns: str, name: str, condition: str, reason: str) -> None:
    """Write what the Job controller writes first: the interim condition, not yet the
    terminal one (the Job is managed by "nobody", so the real controller leaves it alone)."""
    now = "2026-01-01T00:00:01Z"
    cond = {
        "type": condition,
        "status": "True",
        "reason": reason,
        "message": f"{reason} by the stand-in",
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
    counts = {"succeeded": 1} if condition == "SuccessCriteriaMet" else {"failed": 1}
    status = {"startTime": "2026-01-01T00:00:00Z", **counts, "conditions": [cond]}
    kube.patch(JOBS, name, {"status": status}, ns, subresource="status")


@pytest.mark.parametrize(
    ("condition", "reason", "outcome"),
    [("SuccessCriteriaMet", "CompletionsReached", "Succeeded"), ("FailureTarget", "x", "Failed")],
)
def test_a_job_is_decided_by_its_interim_condition(
    kube: Kube, namespace: str, controller: Any, condition: str, reason: str, outcome: str
) -> None:
    """batch/v1 writes SuccessCriteriaMet (FailureTarget) first and Complete (Failed) only
    after removing each pod's finalizer: the Trial ends on the first."""
    controller()
    job = batch_job("true")
    job["spec"]["managedBy"] = "kubetune.test/nobody"
    kube.create(TRIALS, trial("interim", job, retain=True), namespace)
    wait_for("the job", lambda: kube.get_or_none(JOBS, "interim", namespace))
    observe(kube, namespace, "interim", "0.9")
    _decide_job(kube, namespace, "interim", condition, reason)
    done = wait_for(
        outcome, lambda: is_true(t := _trial(kube, namespace, "interim"), outcome) and t, 30
    )
    assert conditions_of(done)[outcome]["reason"].endswith(f"Job reason: {reason}")
    job_conditions = kube.get(JOBS, "interim", namespace)["status"]["conditions"]
    assert [c["type"] for c in job_conditions] == [condition]  # no terminal condition yet


_ADMISSION = "admissionregistration.k8s.io"
POLICIES = Resource(
    _ADMISSION, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", namespaced=False
)
POLICY_BINDINGS = Resource(
    _ADMISSION,
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)


WITHHELD = "the test withholds the Job controller's verdict"


def _refused(kube: Kube, ns: str, name: str) -> bool:
    try:
        _decide_job(kube, ns, name, "SuccessCriteriaMet", "CompletionsReached")
    except errors.ApiError as e:
        if WITHHELD in str(e):
            return True
        raise
    return False


@contextlib.contextmanager
def withheld_job_verdicts(kube: Kube, ns: str) -> Iterator[None]:
    """A ValidatingAdmissionPolicy refusing, in `ns` only, every Job status that says the Job
    succeeded: the Job controller's verdict is withheld while it lasts (then it lands)."""
    name = f"kubetune-test-withhold-{ns}"
    only_ns = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    kube.create(
        POLICIES,
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": only_ns,
                    "resourceRules": [
                        {
                            "apiGroups": ["batch"],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["jobs/status"],
                        }
                    ],
                },
                "validations": [
                    {
                        "expression": "!has(object.status.conditions) || "
                        "!object.status.conditions.exists(c, "
                        "c.type in ['SuccessCriteriaMet', 'Complete'])",
                        "message": WITHHELD,
                    }
                ],
            },
        },
    )
    try:
        kube.create(
            POLICY_BINDINGS,
            {
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": only_ns},
                },
            },
        )
        # The policy takes effect a moment after it is stored: probe it on a Job of nobody's.
        probe = batch_job("true", name="probe")
        probe["spec"]["managedBy"] = "kubetune.test/nobody"
        kube.create(JOBS, probe, ns)
        wait_for("the policy in force", lambda: _refused(kube, ns, "probe"), 30)
        yield
    finally:
        for resource in (POLICY_BINDINGS, POLICIES):
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, name)


def test_a_trial_ends_on_its_jobs_succeeded_pod_without_the_job_controllers_verdict(
    kube: Kube, namespace: str, controller: Any
) -> None:
    """The Job controller writes SuccessCriteriaMet a second after the pod event that woke it;
    the trial-controller reads the Job's pods instead. With that verdict withheld, the Trial
    still ends Succeeded, in the Job controller's words (podverdict)."""
    with withheld_job_verdicts(kube, namespace):
        controller()
        kube.create(TRIALS, trial("pods", batch_job("true"), retain=True), namespace)
        wait_for("the job", lambda: kube.get_or_none(JOBS, "pods", namespace))
        observe(kube, namespace, "pods", "0.9")
        done = wait_for(
            "Succeeded",
            lambda: is_true(t := _trial(kube, namespace, "pods"), "Succeeded") and t,
            90,
        )
        assert conditions_of(done)["Succeeded"]["reason"].endswith("Job reason: CompletionsReached")
        job_status = kube.get(JOBS, "pods", namespace)["status"]
        withheld = {"SuccessCriteriaMet", "Complete"}
        assert not withheld & {c["type"] for c in job_status.get("conditions") or []}
