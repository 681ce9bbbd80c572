"""`podverdict`: a batch/v1 Job's success from its pods, only where the Job controller's next
sync is bound to write it (each rule of the module's docstring, both ways)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetune.jobstatus import JobPhase
from kubetune_trial_controller import deciding, podverdict

NOW = 1_800_000_000.0
STARTED = "2027-01-15T08:00:00Z"


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "t", "namespace": "ns", "uid": "job-uid"},
        "spec": spec,
        "status": {"startTime": STARTED, "active": 1},
    }


def _pod(phase: str, owner_uid: str = "job-uid", name: str = "t-abc") -> dict[str, Any]:
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "t", "uid": owner_uid}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [{**ref, "controller": True}],
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": phase, "containerStatuses": [{"name": "main"}]},
    }


def _phase(job: dict[str, Any], pods: list[dict[str, Any]], now: float = NOW) -> JobPhase:
    return podverdict.success(job, pods, now).phase


def test_one_succeeded_pod_decides_a_plain_job_with_the_job_controllers_words() -> None:
    state = podverdict.success(_job(), [_pod("Succeeded")], NOW)
    assert state.phase is JobPhase.SUCCEEDED
    assert (state.reason, state.message) == (
        "CompletionsReached",
        "Reached expected number of succeeded pods",
    )
    assert _phase(_job(completions=1, parallelism=1), [_pod("Succeeded")]) is JobPhase.SUCCEEDED


@pytest.mark.parametrize("phase", ["Pending", "Running", "Failed", "Unknown", None])
def test_a_pod_not_succeeded_leaves_it_undecided(phase: str | None) -> None:
    assert _phase(_job(), [_pod(phase)]) is JobPhase.RUNNING  # type: ignore[arg-type]


def test_no_pod_leaves_it_undecided() -> None:
    assert _phase(_job(), []) is JobPhase.RUNNING


def test_only_pods_the_job_controls_count() -> None:
    stranger = _pod("Succeeded", owner_uid="other-uid")
    assert _phase(_job(), [stranger]) is JobPhase.RUNNING
    not_controller = _pod("Succeeded")
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert _phase(_job(), [not_controller]) is JobPhase.RUNNING
    # A stranger's pod that failed does not hold back the Job's own success.
    assert _phase(_job(), [_pod("Succeeded"), _pod("Failed", "other-uid")]) is JobPhase.SUCCEEDED


def test_completions_need_that_many_successes_and_no_other_pod() -> None:
    job = _job(completions=2, parallelism=2)
    one = [_pod("Succeeded", name="a")]
    assert _phase(job, one) is JobPhase.RUNNING
    assert _phase(job, [*one, _pod("Running", name="b")]) is JobPhase.RUNNING
    assert _phase(job, [*one, _pod("Succeeded", name="b")]) is JobPhase.SUCCEEDED


def test_the_work_queue_mode_is_decided_only_with_one_pod_at_a_time() -> None:
    """Without completions, any success completes the Job once no pod is active; with
    parallelism above 1 another pod may be about to start, so the pods cannot tell."""
    assert _phase(_job(parallelism=1), [_pod("Succeeded")]) is JobPhase.SUCCEEDED
    assert _phase(_job(parallelism=2), [_pod("Succeeded")]) is JobPhase.RUNNING


@pytest.mark.parametrize(
    "spec",
    [
        {"completionMode": "Indexed", "completions": 1},
        {"suspend": True},
        {"managedBy": "kueue.x-k8s.io/multikueue"},
        {"completions": 0},
    ],
)
def test_jobs_beyond_the_plain_case_wait_for_the_job_controller(spec: dict[str, Any]) -> None:
    assert _phase(_job(**spec), [_pod("Succeeded")]) is JobPhase.RUNNING


def test_the_built_in_controllers_own_name_is_the_plain_case() -> None:
    job = _job(managedBy="kubernetes.io/job-controller", completionMode="NonIndexed")
    assert _phase(job, [_pod("Succeeded")]) is JobPhase.SUCCEEDED


def test_a_job_being_deleted_or_already_ended_is_not_read_from_pods() -> None:
    deleting = _job()
    deleting["metadata"]["deletionTimestamp"] = STARTED
    assert _phase(deleting, [_pod("Succeeded")]) is JobPhase.RUNNING
    for end in ("FailureTarget", "Failed", "SuccessCriteriaMet", "Complete"):
        ended = _job()
        ended["status"]["conditions"] = [{"type": end, "status": "True"}]
        assert _phase(ended, [_pod("Succeeded")]) is JobPhase.RUNNING, end
    suspended_false = _job()
    suspended_false["status"]["conditions"] = [{"type": "Suspended", "status": "False"}]
    assert _phase(suspended_false, [_pod("Succeeded")]) is JobPhase.SUCCEEDED


def test_any_failure_on_record_leaves_it_to_the_job_controller() -> None:
    """A failure may exceed the backoff limit or match a pod failure policy."""
    failed = _job()
    failed["status"]["failed"] = 1
    assert _phase(failed, [_pod("Succeeded")]) is JobPhase.RUNNING
    uncounted = _job()
    uncounted["status"]["uncountedTerminatedPods"] = {"failed": ["uid-1"]}
    assert _phase(uncounted, [_pod("Succeeded")]) is JobPhase.RUNNING
    uncounted_success = _job()
    uncounted_success["status"]["uncountedTerminatedPods"] = {"succeeded": ["uid-1"]}
    assert _phase(uncounted_success, [_pod("Succeeded")]) is JobPhase.SUCCEEDED


def test_a_near_deadline_leaves_it_to_the_job_controller() -> None:
    """The sync checks activeDeadlineSeconds before completions."""
    started = deciding.parse_time(STARTED)
    assert started is not None
    job = _job(activeDeadlineSeconds=100)
    assert _phase(job, [_pod("Succeeded")], started + 60) is JobPhase.SUCCEEDED
    assert _phase(job, [_pod("Succeeded")], started + 80) is JobPhase.RUNNING
    assert _phase(job, [_pod("Succeeded")], started + 200) is JobPhase.RUNNING
    no_start = copy.deepcopy(job)
    del no_start["status"]["startTime"]
    assert _phase(no_start, [_pod("Succeeded")], started) is JobPhase.RUNNING


def test_slim_keeps_what_the_verdict_reads() -> None:
    pod = _pod("Succeeded")
    pod["metadata"]["labels"] = {"katib.kubeflow.org/trial": "t"}
    pod["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    slim = podverdict.slim(pod)
    assert "spec" not in slim and "managedFields" not in slim["metadata"]
    assert slim["status"] == {"phase": "Succeeded"}
    assert slim["metadata"]["labels"] == {"katib.kubeflow.org/trial": "t"}
    assert _phase(_job(), [slim]) is JobPhase.SUCCEEDED
