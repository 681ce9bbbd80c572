"""The Trial's next status from what was seen of its job: pure, so every rule is a unit test.

Rules (Katib's Trial conditions, with kubetune's choices; docs/operations.md says what each
failure means to a user):

* `Created` means the job exists: it is written together with the first status after the job
  was created (upstream writes it one pass earlier). A Trial that shows `Created` and has no
  job therefore lost it to someone else -> Failed.
* Failure is checked first (as `jobstatus` does). Failed, Succeeded and MetricsUnavailable set
  an existing `Running` to False (same reason and message) before being appended, and set
  `completionTime`. Reasons and messages carry the job's own: `TrialFailed. Job reason: <r>`,
  `Trial has failed. Job message: <m>`.
* Success needs the job to succeed AND an available observation (objective `latest` reported).
  When does the collector count as finished without metrics? When `status.observation` is
  present but its objective is `unavailable`: that is what the collector reports when the
  training wrote no objective row. Until an observation arrives the Trial stays
  Running with a message saying it waits for the collector; after `metrics_timeout` seconds
  (0 = wait forever, as upstream) it becomes MetricsUnavailable, so a collector that died
  without reporting does not leave the Trial Running for ever.
* Collector kinds without a sidecar (`Push`, and `None`, its pre-v0.18 name): nothing will
  come later, so a succeeded job without an available observation makes the trial-controller
  write an `unavailable` objective itself and mark MetricsUnavailable (upstream inserts the row).
* EarlyStopped (set by the collector) is final except for MetricsUnavailable, which follows
  when its observation is not available, by the same rules.
* A running job keeps `Running` with a message naming what the controller waits for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetune import conditions, observations
from kubetune.api.base import Condition
from kubetune.api.common import CollectorKind, ObjectiveSpec
from kubetune.api.trial import Trial
from kubetune.conditions import TRIAL, TrialCondition, TrialReason
from kubetune.jobstatus import JobPhase

T = TrialCondition
R = TrialReason
TRUE, FALSE = conditions.TRUE, conditions.FALSE

MSG_CREATED = "Trial is created"
MSG_RUNNING = "Trial is running"
MSG_SUCCEEDED = "Trial has succeeded"
MSG_FAILED = "Trial has failed"
MSG_METRICS_UNAVAILABLE = "Metrics are not available"
NO_SIDECAR_KINDS = frozenset({CollectorKind.PUSH.value, CollectorKind.NONE.value})


@dataclass(frozen=True)
class Seen:
    """What the reconciler found: the job's phase, or a problem that fails the Trial."""

    phase: JobPhase = JobPhase.RUNNING
    reason: str = ""
    message: str = ""
    problem: str = ""  # e.g. "JobDeleted"; non-empty fails the Trial with `message`
    waiting_for: str = ""  # what a running job must show, for the Running message


@dataclass(frozen=True)
class Decision:
    status: dict[str, Any] | None = None  # status fields to patch; None = nothing changed
    requeue_after: float | None = None
    finished: bool = False  # the Trial is completed after this status
    events: list[str] = field(default_factory=list)  # condition types newly set True


def with_job(base: str, label: str, value: str) -> str:
    return f"{base}. Job {label}: {value}" if value else base


def parse_time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def set_message(
    conds: Sequence[Condition], type_: str, message: str, now: str
) -> tuple[list[Condition], bool]:
    """Update a condition's message in place (upstream's setter ignores message-only changes,
    but a waiting Trial's message must say what it waits for now)."""
    out = list(conds)
    for index, cond in enumerate(out):
        if cond.type == type_ and cond.message != message:
            out[index] = cond.model_copy(update={"message": message, "last_update_time": now})
            return out, True
    return out, False


def is_completed(conds: Sequence[Condition] | None) -> bool:
    return any(conditions.is_true(conds, t) for t in conditions.TRIAL_COMPLETED)


def needs_job(trial: Trial) -> bool:
    """Whether the reconciler must look at the job: not completed (EarlyStopped waits only for
    its observation, which needs no job)."""
    status = trial.status
    return not is_completed(status.conditions if status else None)


def awaiting_observation(trial: Trial) -> bool:
    """EarlyStopped without an available observation and not yet MetricsUnavailable."""
    status = trial.status
    conds = status.conditions if status else None
    return (
        conditions.is_true(conds, T.EARLY_STOPPED)
        and not conditions.is_true(conds, T.METRICS_UNAVAILABLE)
        and not observations.is_available(_objective(trial), status.observation if status else None)
    )


def _objective(trial: Trial) -> ObjectiveSpec:
    return trial.spec.objective or ObjectiveSpec()


def _collector_kind(trial: Trial) -> str:
    spec = trial.spec.metrics_collector
    kind = spec.collector.kind if spec and spec.collector else None
    return kind or CollectorKind.STDOUT.value


class _Builder:
    """Accumulates condition changes on a copy of the Trial's status."""

    def __init__(self, trial: Trial, now: str) -> None:
        status = trial.status
        self.now = now
        self.conds: list[Condition] = list(status.conditions or []) if status else []
        self.patch: dict[str, Any] = {}
        self.events: list[str] = []
        self.completion_time = status.completion_time if status else None
        if not (status and status.start_time):
            self.patch["startTime"] = now

    def put(self, type_: str, status: str, reason: str, message: str) -> None:
        self.conds, changed = TRIAL.set(self.conds, type_, status, reason, message, now=self.now)
        if changed:
            self.patch["conditions"] = None  # filled in by `decision`
            if status == TRUE:
                self.events.append(type_)

    def message(self, type_: str, message: str) -> None:
        self.conds, changed = set_message(self.conds, type_, message, self.now)
        if changed:
            self.patch["conditions"] = None

    def created(self) -> None:
        if not conditions.is_true(self.conds, T.CREATED):
            self.put(T.CREATED, TRUE, R.CREATED, MSG_CREATED)

    def running(self, message: str) -> None:
        if conditions.is_true(self.conds, T.RUNNING):
            self.message(T.RUNNING, message)
        else:
            self.put(T.RUNNING, TRUE, R.RUNNING, message)

    def finish(self, type_: str, reason: str, message: str, *, stop_running: bool = True) -> None:
        running = conditions.find(self.conds, T.RUNNING)
        if stop_running and running is not None and running.status == TRUE:
            self.put(T.RUNNING, FALSE, running.reason or R.RUNNING, running.message or "")
        self.put(type_, TRUE, reason, message)
        if not self.completion_time:
            self.patch["completionTime"] = self.now

    def decision(self, requeue_after: float | None = None) -> Decision:
        finished = is_completed(self.conds) and not conditions.is_true(self.conds, T.RUNNING)
        if not self.patch:
            return Decision(None, requeue_after, finished, [])
        if "conditions" in self.patch:
            self.patch["conditions"] = [c.to_wire() for c in self.conds]
        return Decision(self.patch, requeue_after, finished, self.events)


def _wait_for_metrics(
    b: _Builder,
    since: str | None,
    now_ts: float,
    metrics_timeout: float,
    final_reason: str,
    *,
    stop_running: bool = True,
) -> float | None:
    """Keep waiting for the collector, or give up after the timeout; returns the requeue."""
    if metrics_timeout <= 0:
        return None
    started = parse_time(since)
    elapsed = now_ts - started if started is not None else 0.0
    if elapsed >= metrics_timeout:
        b.finish(
            T.METRICS_UNAVAILABLE,
            final_reason,
            f"{MSG_METRICS_UNAVAILABLE}: no observation was reported within "
            f"{metrics_timeout:g}s of the job's success",
            stop_running=stop_running,
        )
        return None
    return max(0.05, metrics_timeout - elapsed)


def decide(
    trial: Trial,
    seen: Seen,
    *,
    now: str,
    now_ts: float,
    metrics_timeout: float = 600.0,
) -> Decision:
    """The status patch for `trial` given `seen`, and when to look again.

    Args:
        trial: the Trial as read.
        seen: the job's evaluated phase (ignored for EarlyStopped trials) or a problem.
        now: the RFC3339 time stamp to write; `now_ts` the same instant in epoch seconds.
        metrics_timeout: seconds to wait for an observation after the job succeeded (0 = ever).
    """
    b = _Builder(trial, now)
    status = trial.status
    observation = status.observation if status else None
    objective = _objective(trial)
    available = observations.is_available(objective, observation)
    reported_empty = bool(observation and observation.metrics) and not available
    no_sidecar = _collector_kind(trial) in NO_SIDECAR_KINDS

    if conditions.is_true(b.conds, T.EARLY_STOPPED):
        if available or conditions.is_true(b.conds, T.METRICS_UNAVAILABLE):
            return b.decision()
        if reported_empty or no_sidecar:
            if no_sidecar and not reported_empty:
                b.patch["observation"] = observations.summarise(objective, []).to_wire()
            # After EarlyStopped only MetricsUnavailable may follow (the collector left Running).
            b.finish(
                T.METRICS_UNAVAILABLE,
                R.METRICS_UNAVAILABLE,
                MSG_METRICS_UNAVAILABLE,
                stop_running=False,
            )
            return b.decision()
        stopped = conditions.find(b.conds, T.EARLY_STOPPED)
        since = stopped.last_transition_time if stopped else None
        again = _wait_for_metrics(
            b, since, now_ts, metrics_timeout, R.METRICS_UNAVAILABLE, stop_running=False
        )
        return b.decision(again)

    if is_completed(b.conds):
        return b.decision()

    b.created()
    if seen.problem:
        b.finish(
            T.FAILED,
            with_job(R.FAILED, "reason", seen.problem),
            with_job(MSG_FAILED, "message", seen.message),
        )
        return b.decision()
    if seen.phase is JobPhase.FAILED:
        b.finish(
            T.FAILED,
            with_job(R.FAILED, "reason", seen.reason),
            with_job(MSG_FAILED, "message", seen.message),
        )
        return b.decision()
    if seen.phase is JobPhase.SUCCEEDED:
        if available:
            b.finish(
                T.SUCCEEDED,
                with_job(R.SUCCEEDED, "reason", seen.reason),
                with_job(MSG_SUCCEEDED, "message", seen.message),
            )
            return b.decision()
        if reported_empty or no_sidecar:
            if no_sidecar and not reported_empty:
                b.patch["observation"] = observations.summarise(objective, []).to_wire()
            b.finish(
                T.METRICS_UNAVAILABLE,
                with_job(R.METRICS_UNAVAILABLE, "reason", seen.reason),
                with_job(MSG_METRICS_UNAVAILABLE, "message", seen.message),
            )
            return b.decision()
        waiting = (
            f"{MSG_RUNNING}: the job has succeeded; waiting for the metrics collector to report "
            f"status.observation ({objective.objective_metric_name or 'objective'})"
        )
        if metrics_timeout > 0:
            waiting += f", MetricsUnavailable after {metrics_timeout:g}s"
        b.running(waiting)
        running = conditions.find(b.conds, T.RUNNING)
        again = _wait_for_metrics(
            b,
            running.last_update_time if running else now,
            now_ts,
            metrics_timeout,
            with_job(R.METRICS_UNAVAILABLE, "reason", seen.reason),
        )
        return b.decision(again)
    message = f"{MSG_RUNNING}: {seen.waiting_for}" if seen.waiting_for else MSG_RUNNING
    b.running(message)
    return b.decision()
