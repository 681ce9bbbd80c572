"""Bad input and faults: each ends in a clear Trial state, and the controller keeps serving."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kubetune.kube import JOBS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import conditions_of, is_true, job_succeeded
from kubetune_testkit.standins.services import observe
from kubetune_testkit.waiting import wait_for
from kubetune_trial_controller import building

pytestmark = pytest.mark.integration


def _get(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return kube.get_or_none(TRIALS, name, ns)


def _ended(kube: Kube, ns: str, name: str, type_: str, timeout: float = 90) -> dict[str, Any]:
    result: dict[str, Any] = wait_for(
        f"{name} {type_}", lambda: is_true(t := _get(kube, ns, name), type_) and t, timeout
    )
    return result


def _job_status(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return (kube.get_or_none(JOBS, name, ns) or {}).get("status") or {}


def _reconciled_again(kube: Kube, ns: str, name: str) -> None:
    """Return once the controller (started with `--workers=1`) has passed over Trial `name`
    after every change made so far, without a timed window: a change of the Trial, then a
    second Trial run to its end. One worker takes keys in the order they came, and the second
    Trial's last pass follows its job's run, which began after `name`'s passes were queued."""
    kube.patch(TRIALS, name, {"metadata": {"labels": {"touched": "yes"}}}, ns)
    kube.create(TRIALS, trial(f"after-{name}", batch_job("true"), collector="Push"), ns)
    _ended(kube, ns, f"after-{name}", "MetricsUnavailable")


def _widget(kind: str = "Gadget", group: str = "missing.kubetune.test") -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {}, "spec": {}}


def test_kind_not_installed_fails_and_others_are_served(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller("--trial-resources", "Job.v1.batch,Gadget.v1.missing.kubetune.test")
    kube.create(
        TRIALS,
        trial("nocrd", _widget(), success="status.[@this].#(done==true)#", failure="status.x"),
        namespace,
    )
    kube.create(TRIALS, trial("fine", batch_job("true"), collector="Push"), namespace)
    failed = conditions_of(_ended(kube, namespace, "nocrd", "Failed"))["Failed"]
    assert failed["reason"] == (
        "TrialFailed. Job reason: JobKindNotInstalled: Gadget.v1.missing.kubetune.test"
    )
    assert "Gadget.v1.missing.kubetune.test" in failed["message"]
    _ended(kube, namespace, "fine", "MetricsUnavailable")


def test_kind_not_in_allow_list_fails(kube: Kube, namespace: str, controller: Any) -> None:
    proc = controller("--trial-resources", "Job.v1.batch")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {}},
    }
    kube.create(
        TRIALS,
        trial("deploy", deployment, success="status.conditions", failure="status.x"),
        namespace,
    )
    failed = conditions_of(_ended(kube, namespace, "deploy", "Failed"))["Failed"]
    assert failed["reason"] == "TrialFailed. Job reason: JobKindNotAllowed: Deployment.v1.apps"
    assert "Deployment.v1.apps" in failed["message"]
    assert "Job.v1.batch" in failed["message"]
    assert proc.alive()


@pytest.mark.parametrize(
    ("field", "expression"),
    [
        ("success", 'status.conditions.#(type=="Complete"'),
        ("failure", "status.conditions.#(type==Failed)#"),
        ("success", "status.@bogus"),
    ],
    ids=["unclosed-query", "unquoted-value", "unknown-modifier"],
)
def test_malformed_condition_fails_with_expression_and_no_crash_loop(
    kube: Kube, namespace: str, controller: Any, field: str, expression: str
) -> None:
    proc = controller()
    good_success = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    good_failure = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    conds = {
        "success": expression if field == "success" else good_success,
        "failure": expression if field == "failure" else good_failure,
    }
    kube.create(
        TRIALS,
        trial("malformed", batch_job("true"), success=conds["success"], failure=conds["failure"]),
        namespace,
    )
    kube.create(TRIALS, trial("after", batch_job("true"), collector="Push"), namespace)
    failed = conditions_of(_ended(kube, namespace, "malformed", "Failed"))["Failed"]
    assert failed["reason"] == "TrialFailed. Job reason: InvalidJobCondition"
    assert expression in failed["message"]
    # Nothing was created for it, the controller lives on and serves the next Trial.
    assert kube.get_or_none(JOBS, "malformed", namespace) is None
    _ended(kube, namespace, "after", "MetricsUnavailable")
    stamp = conditions_of(_get(kube, namespace, "malformed"))["Failed"]["lastUpdateTime"]
    assert proc.alive()
    # Failed is final: later passes (the resync, the other Trial's events) change nothing.
    assert conditions_of(_get(kube, namespace, "malformed"))["Failed"]["lastUpdateTime"] == stamp


def test_job_deleted_by_someone_else_fails_the_trial(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller("--workers=1")
    kube.create(TRIALS, trial("victim", batch_job("sleep 600")), namespace)
    wait_for("Running", lambda: is_true(_get(kube, namespace, "victim"), "Running"))
    kube.delete(JOBS, "victim", namespace, propagation="Background")
    failed = conditions_of(_ended(kube, namespace, "victim", "Failed"))["Failed"]
    assert failed["reason"] == "TrialFailed. Job reason: JobDeleted"
    assert "deleted by someone else" in failed["message"]
    _reconciled_again(kube, namespace, "victim")
    assert kube.get_or_none(JOBS, "victim", namespace) is None, "re-created behind the user's back"


def test_job_that_never_reports_stays_running_and_says_what_it_waits_for(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller("--workers=1")
    kube.create(TRIALS, trial("silent", batch_job("sleep 600")), namespace)
    wait_for("Running", lambda: is_true(_get(kube, namespace, "silent"), "Running"))
    wait_for("its pod ready", lambda: (_job_status(kube, namespace, "silent")).get("ready"))
    _reconciled_again(kube, namespace, "silent")  # after the job's last change: no false success
    got = kube.get(TRIALS, "silent", namespace)
    assert [c["type"] for c in got["status"]["conditions"]] == ["Created", "Running"]
    message = conditions_of(got)["Running"]["message"]
    assert "waiting for Job silent to match successCondition" in message
    assert 'status.conditions.#(type=="Complete")#|#(status=="True")#' in message


def test_job_created_before_the_status_write_is_adopted(
    kube: Kube, namespace: str, controller: Any
) -> None:
    """The state a controller killed between create and status write leaves behind."""
    created = kube.create(TRIALS, trial("adopt", batch_job("true")), namespace)
    job = kube.create(JOBS, building.job_for(created), namespace)
    controller()
    wait_for(
        "job complete",
        lambda: job_succeeded(kube.get_or_none(JOBS, "adopt", namespace)),
        90,
    )
    observe(kube, namespace, "adopt", "0.5")
    _ended(kube, namespace, "adopt", "Succeeded")
    assert kube.get(JOBS, "adopt", namespace)["metadata"]["uid"] == job["metadata"]["uid"]


@pytest.mark.parametrize("kill_after", [0.0, 0.4, 1.0, 2.0])
def test_controller_killed_and_restarted(
    kube: Kube, namespace: str, controller: Any, kill_after: float
) -> None:
    proc = controller()
    kube.create(TRIALS, trial("phoenix", batch_job("sleep 2")), namespace)
    uids: set[str] = set()
    for delay in (kill_after, kill_after / 2 + 0.3, kill_after + 0.6):
        time.sleep(delay)
        proc.kill()
        job = kube.get_or_none(JOBS, "phoenix", namespace)
        if job is not None:
            uids.add(job["metadata"]["uid"])
        proc.start()
    wait_for("Running", lambda: is_true(_get(kube, namespace, "phoenix"), "Running"), 60)
    uids.add(kube.get(JOBS, "phoenix", namespace)["metadata"]["uid"])
    wait_for(
        "job complete",
        lambda: job_succeeded(kube.get_or_none(JOBS, "phoenix", namespace)),
        90,
    )
    proc.kill()  # once more, while the job has succeeded and the observation is missing
    observe(kube, namespace, "phoenix", "0.7")
    proc.start()
    done = _ended(kube, namespace, "phoenix", "Succeeded")
    assert len(uids) == 1, f"the job was created more than once: {uids}"
    assert kube.get(JOBS, "phoenix", namespace)["metadata"]["uid"] in uids
    assert not is_true(done, "Failed")
    assert [c["type"] for c in done["status"]["conditions"]] == ["Created", "Running", "Succeeded"]
