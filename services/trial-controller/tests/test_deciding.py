"""The status rules, table by table (pure; no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.api.trial import Trial
from kubetune.jobstatus import JobPhase
from kubetune_trial_controller.deciding import Seen, decide

NOW = "2026-01-01T00:00:10Z"
NOW_TS = 1767225610.0  # NOW in epoch seconds


def _cond(type_: str, status: str = "True", reason: str = "", **extra: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason or f"Trial{type_}",
        "message": "m",
        "lastUpdateTime": extra.get("updated", "2026-01-01T00:00:00Z"),
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def _trial(
    conds: list[dict[str, Any]] | None = None,
    observation: str | None = None,
    collector: str = "StdOut",
) -> Trial:
    status: dict[str, Any] = {}
    if conds is not None:
        status = {"startTime": "2026-01-01T00:00:00Z", "conditions": conds}
    if observation is not None:
        status["observation"] = {
            "metrics": [
                {"name": "acc", "min": observation, "max": observation, "latest": observation}
            ]
        }
    return Trial.model_validate(
        {
            "metadata": {"name": "t", "namespace": "n"},
            "spec": {
                "objective": {"type": "maximize", "objectiveMetricName": "acc"},
                "metricsCollector": {"collector": {"kind": collector}},
            },
            "status": status,
        }
    )


def _types(status: dict[str, Any] | None) -> list[tuple[str, str]]:
    assert status is not None
    return [(c["type"], c["status"]) for c in status["conditions"]]


RUNNING = [_cond("Created"), _cond("Running")]


def test_first_pass_creates_and_runs_with_what_it_waits_for() -> None:
    d = decide(_trial(), Seen(waiting_for="waiting for Job t"), now=NOW, now_ts=NOW_TS)
    assert d.status is not None
    assert _types(d.status) == [("Created", "True"), ("Running", "True")]
    assert d.status["startTime"] == NOW
    assert d.status["conditions"][-1]["message"] == "Trial is running: waiting for Job t"
    assert not d.finished


def test_running_again_changes_nothing() -> None:
    conds = [_cond("Created"), {**_cond("Running"), "message": "Trial is running: w"}]
    d = decide(_trial(conds), Seen(waiting_for="w"), now=NOW, now_ts=NOW_TS)
    assert d.status is None


@pytest.mark.parametrize(
    ("seen", "observation", "collector", "final", "reason"),
    [
        (
            Seen(JobPhase.FAILED, "BackoffLimitExceeded", "x"),
            None,
            "StdOut",
            "Failed",
            "TrialFailed. Job reason: BackoffLimitExceeded",
        ),
        (Seen(JobPhase.FAILED), "0.9", "StdOut", "Failed", "TrialFailed"),
        (
            Seen(JobPhase.SUCCEEDED, "Done"),
            "0.9",
            "StdOut",
            "Succeeded",
            "TrialSucceeded. Job reason: Done",
        ),
        (
            Seen(JobPhase.SUCCEEDED),
            "unavailable",
            "StdOut",
            "MetricsUnavailable",
            "MetricsUnavailable",
        ),
        (Seen(JobPhase.SUCCEEDED), None, "Push", "MetricsUnavailable", "MetricsUnavailable"),
        (Seen(JobPhase.SUCCEEDED), None, "None", "MetricsUnavailable", "MetricsUnavailable"),
        (Seen(JobPhase.SUCCEEDED), "0.5", "Push", "Succeeded", "TrialSucceeded"),
        (
            Seen(problem="JobDeleted", message="gone"),
            None,
            "StdOut",
            "Failed",
            "TrialFailed. Job reason: JobDeleted",
        ),
    ],
    ids=[
        "failed",
        "failed-despite-metrics",
        "succeeded",
        "reported-unavailable",
        "push-empty",
        "none-empty",
        "push-metrics",
        "problem",
    ],
)
def test_endings(
    seen: Seen, observation: str | None, collector: str, final: str, reason: str
) -> None:
    d = decide(_trial(RUNNING, observation, collector), seen, now=NOW, now_ts=NOW_TS)
    assert d.status is not None and d.finished
    assert _types(d.status) == [("Created", "True"), ("Running", "False"), (final, "True")]
    assert d.status["conditions"][-1]["reason"] == reason
    assert d.status["completionTime"] == NOW
    if collector in ("Push", "None") and observation is None:
        assert d.status["observation"]["metrics"][0]["latest"] == "unavailable"
    else:
        assert "observation" not in d.status


def test_job_message_is_carried() -> None:
    d = decide(_trial(RUNNING), Seen(JobPhase.FAILED, "R", "pod oom"), now=NOW, now_ts=NOW_TS)
    assert d.status is not None
    assert d.status["conditions"][-1]["message"] == "Trial has failed. Job message: pod oom"


def test_problem_before_anything_else_still_creates_first() -> None:
    d = decide(_trial(), Seen(problem="JobKindNotAllowed", message="k"), now=NOW, now_ts=NOW_TS)
    assert _types(d.status) == [("Created", "True"), ("Failed", "True")]


def test_succeeded_job_without_observation_waits_then_times_out() -> None:
    d = decide(
        _trial(RUNNING), Seen(JobPhase.SUCCEEDED), now=NOW, now_ts=NOW_TS, metrics_timeout=30
    )
    assert d.status is not None and not d.finished
    running = d.status["conditions"][-1]
    assert (
        running["type"] == "Running" and "waiting for the metrics collector" in running["message"]
    )
    assert d.requeue_after == pytest.approx(30)
    waiting = [_cond("Created"), {**running}]
    later = NOW_TS + 31
    d2 = decide(
        _trial(waiting), Seen(JobPhase.SUCCEEDED), now=NOW, now_ts=later, metrics_timeout=30
    )
    assert d2.finished and d2.status is not None
    assert d2.status["conditions"][-1]["type"] == "MetricsUnavailable"
    assert "within 30s" in d2.status["conditions"][-1]["message"]


def test_wait_forever_when_timeout_is_zero() -> None:
    d = decide(
        _trial(RUNNING), Seen(JobPhase.SUCCEEDED), now=NOW, now_ts=NOW_TS + 1e6, metrics_timeout=0
    )
    assert not d.finished and d.requeue_after is None


@pytest.mark.parametrize("final", ["Succeeded", "Failed", "MetricsUnavailable", "Killed"])
def test_completed_is_final(final: str) -> None:
    conds = [_cond("Created"), _cond("Running", "False"), _cond(final)]
    for seen in (Seen(JobPhase.FAILED), Seen(JobPhase.SUCCEEDED), Seen(problem="JobDeleted")):
        d = decide(_trial(conds, "0.1"), seen, now=NOW, now_ts=NOW_TS)
        assert d.status is None and d.finished


def test_early_stopped_with_metrics_stays() -> None:
    conds = [*RUNNING, _cond("EarlyStopped")]
    d = decide(_trial(conds, "0.3"), Seen(JobPhase.FAILED), now=NOW, now_ts=NOW_TS)
    assert d.status is None


def test_early_stopped_without_metrics_becomes_metrics_unavailable() -> None:
    conds = [*RUNNING, _cond("EarlyStopped")]
    d = decide(_trial(conds, "unavailable"), Seen(), now=NOW, now_ts=NOW_TS)
    assert d.status is not None
    assert d.status["conditions"][-1]["type"] == "MetricsUnavailable"


def test_early_stopped_without_observation_times_out() -> None:
    conds = [*RUNNING, _cond("EarlyStopped")]
    d = decide(_trial(conds), Seen(), now=NOW, now_ts=NOW_TS + 1000, metrics_timeout=30)
    assert d.status is not None
    assert d.status["conditions"][-1]["type"] == "MetricsUnavailable"
    assert ("Running", "True") in _types(d.status)
