"""Which recorded refusals fail a Trial (pure rules of `refusals.find`)."""

from __future__ import annotations

from typing import Any

from kubetune.runtime import Key
from kubetune_trial_controller import refusals

WEBHOOK = 'Error creating: admission webhook "deny.example.com" denied the request: no GPUs here'
QUOTA = 'Error creating: pods "t-abcde" is forbidden: exceeded quota: q, requested: cpu=2'


def event(
    message: str,
    *,
    uid: str = "u1",
    count: int = 1,
    when: str = "2026-01-01T00:00:00Z",
    reason: str = "FailedCreate",
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": f"t.{abs(hash((message, when))) % 10**8}"},
        "involvedObject": {"kind": "Job", "name": "t", "namespace": "ns", "uid": uid},
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": when,
    }


def test_an_admission_denial_is_final_at_once() -> None:
    found = refusals.find([event(WEBHOOK)], "u1")
    assert found is not None and found.persistent
    assert found.reason == "FailedCreate" and found.message == WEBHOOK


def test_other_refusals_must_repeat() -> None:
    once = refusals.find([event(QUOTA)], "u1")
    assert once is not None and not once.persistent
    again = refusals.find([event(QUOTA, count=2), event(QUOTA, when="2026-01-01T00:01:00Z")], "u1")
    assert again is not None and again.count == 3 and again.persistent


def test_the_denial_is_reported_even_when_a_later_refusal_differs() -> None:
    found = refusals.find([event(WEBHOOK), event(QUOTA, when="2026-01-01T00:05:00Z")], "u1")
    assert found is not None and found.persistent and found.message == WEBHOOK


def test_events_of_another_job_or_reason_do_not_count() -> None:
    assert refusals.find([event(WEBHOOK, uid="other")], "u1") is None
    assert refusals.find([event(WEBHOOK, reason="BackoffLimitExceeded")], "u1") is None
    assert refusals.find([event(WEBHOOK)], "") is None
    training_operator = refusals.find([event(WEBHOOK, reason="FailedCreatePod")], "u1")
    assert training_operator is not None and training_operator.persistent


def test_events_map_to_the_trial_of_their_job_kind_only() -> None:
    keys = refusals.event_keys(["Job", "TFJob"])
    assert keys(event(WEBHOOK)) == [Key("ns", "t")]
    pod = event(WEBHOOK)
    pod["involvedObject"]["kind"] = "Pod"
    assert keys(pod) == []
