"""batch/v1 Job trials through the real job controller and the node agent; the test writes the
observation in place of the metrics collector."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import JOBS, PODS, ROLE_BINDINGS, TRIALS, Kube
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
