"""A batch/v1 Job's success read from its pods, before the Job controller writes it.

Why: kube-controller-manager's Job controller syncs a Job at least one second after the pod
event that woke it (`SyncJobBatchPeriod`, fixed, no flag), so `SuccessCriteriaMet` comes about a
second after the last pod of a Trial's Job exits, on every cluster. For a Trial of 3 s that
second is a third of its run. When the pods alone already decide the outcome, this module
gives the verdict that sync will write, with the same reason and message.

The rule follows `syncJob` (pkg/controller/job, Kubernetes 1.35) and is deliberately narrow:
it answers only the plain case, and "undecided" (wait for the Job controller) for anything else.

* The Job is the built-in controller's (no other `managedBy`), non-indexed, not suspended, not
  being deleted, and shows no end condition yet (one that has is decided by it).
* No pod ever failed: `status.failed` is 0, none is uncounted, and every pod the Job owns (by
  controller reference and uid) is `Succeeded`. So neither the backoff limit nor a pod
  failure policy can fail it, and no pod is active.
* Enough pods succeeded: `completions` of them, or, without `completions` (the work-queue
  mode, where any success completes the Job once no pod is active), one with `parallelism`
  at most 1, so no pod may be about to start.
* An `activeDeadlineSeconds` is at least `DEADLINE_MARGIN` away: the sync checks the deadline
  before the completions, so a Job whose pods all succeeded just before its deadline can
  still fail, and clocks differ between machines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubetune import katibsidecar
from kubetune.jobstatus import JobPhase, JobStatus
from kubetune.kube import Obj
from kubetune_trial_controller import deciding

JOB_CONTROLLER = "kubernetes.io/job-controller"
DEADLINE_MARGIN = 30.0  # seconds
REASON = "CompletionsReached"
MESSAGE = "Reached expected number of succeeded pods"
END_CONDITIONS = frozenset({"Complete", "SuccessCriteriaMet", "Failed", "FailureTarget"})
# What `slim` keeps of a pod: the verdict reads only these.
KEPT_POD_METADATA = ("name", "namespace", "uid", "labels", "ownerReferences", "deletionTimestamp")


def slim(pod: Obj) -> Obj:
    """A pod as the trial-controller caches it: its owner, labels and phase (a pod spec with
    the collector sidecar is a few KiB, times every running Trial)."""
    meta = pod.get("metadata") or {}
    kept: Obj = {
        "metadata": {k: meta[k] for k in KEPT_POD_METADATA if k in meta},
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }
    katib = katibsidecar.slim_spec(pod)  # a pod Katib's webhook injected is reported (katibpods)
    if katib is not None:
        kept["spec"] = katib
    return kept


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("uid") == uid for r in refs if isinstance(r, dict))


def _deadline_is_near(spec: Mapping[str, Any], status: Mapping[str, Any], now: float) -> bool:
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is None:
        return False
    start = status.get("startTime")
    started = deciding.parse_time(start) if isinstance(start, str) else None
    if started is None or not isinstance(deadline, int):
        return True
    return started + deadline - now < DEADLINE_MARGIN


def _plain_job(job: Mapping[str, Any], now: float) -> bool:
    meta, spec, status = (job.get(k) or {} for k in ("metadata", "spec", "status"))
    if meta.get("deletionTimestamp") or spec.get("suspend"):
        return False
    if spec.get("managedBy") not in (None, JOB_CONTROLLER):
        return False
    if spec.get("completionMode") not in (None, "NonIndexed"):
        return False
    if any(
        isinstance(c, dict) and c.get("type") in END_CONDITIONS and c.get("status") == "True"
        for c in status.get("conditions") or []
    ):
        return False
    uncounted_failed = (status.get("uncountedTerminatedPods") or {}).get("failed") or []
    if status.get("failed") or uncounted_failed:
        return False
    return not _deadline_is_near(spec, status, now)


def _needed(spec: Mapping[str, Any]) -> int | None:
    """Successes that complete the Job; None when the pods cannot tell."""
    completions = spec.get("completions")
    if completions is not None:
        return completions if isinstance(completions, int) and completions > 0 else None
    parallelism = spec.get("parallelism", 1)
    return 1 if isinstance(parallelism, int) and parallelism <= 1 else None


def success(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], now: float) -> JobStatus:
    """SUCCEEDED with the Job controller's reason and message when the Job's pods decide its
    success (see the module's rules); RUNNING (undecided) otherwise. `pods` may hold other
    objects' pods: only those the Job controls count."""
    undecided = JobStatus(JobPhase.RUNNING)
    if not _plain_job(job, now):
        return undecided
    needed = _needed(job.get("spec") or {})
    uid = (job.get("metadata") or {}).get("uid")
    if needed is None or not uid:
        return undecided
    phases = [(p.get("status") or {}).get("phase") for p in pods if _owned_by(p, uid)]
    if len(phases) < needed or any(phase != "Succeeded" for phase in phases):
        return undecided
    return JobStatus(JobPhase.SUCCEEDED, REASON, MESSAGE)
