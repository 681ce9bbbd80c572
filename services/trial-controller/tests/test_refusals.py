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


# What the API server writes when it cannot call a webhook (the Job controller prefixes it).
UNREACHABLE = [
    'Error creating: Internal error occurred: failed calling webhook "pods.example.com": failed '
    'to call webhook: Post "https://pods.example.svc:443/validate?timeout=10s": read tcp '
    "10.0.0.1:51234->10.96.0.7:443: read: connection reset by peer",
    'Error creating: Internal error occurred: failed calling webhook "pods.example.com": failed '
    'to call webhook: Post "https://127.0.0.1:9/validate?timeout=10s": dial tcp 127.0.0.1:9: '
    "connect: connection refused",
    'Error creating: Internal error occurred: failed calling webhook "pods.example.com": failed '
    'to call webhook: Post "https://pods.example.svc:443/validate?timeout=10s": context deadline '
    "exceeded",
    'Error creating: Internal error occurred: failed calling webhook "pods.example.com": failed '
    'to call webhook: Post "https://pods.example.svc:443/validate?timeout=10s": no endpoints '
    'available for service "pods-example"',
    "Error creating: Internal error occurred: failed calling webhook: the server responded with "
    "Service Unavailable",
]
# kubetune's webhook refusing with code 500 ("cannot check, retry"): the Event has no code.
KUBETUNE_CANNOT_CHECK = (
    'Error creating: admission webhook "pod.kubetune.kubeflow.org" denied the request: pod is '
    "labelled katib.kubeflow.org/trial=t but its owners cannot be read to confirm it belongs to "
    "that Trial: timed out; retry (transient: retry)"
)


def test_an_unreachable_webhook_never_fails_the_trial() -> None:
    """A webhook outage: the same refusal repeats for as long as it lasts, and says nothing of
    the pods; the Trial waits."""
    for message in UNREACHABLE:
        many = [event(message, count=50, when=f"2026-01-01T00:0{i}:00Z") for i in range(5)]
        assert refusals.find(many, "u1") is None, message


def test_kubetunes_own_cannot_check_refusal_is_not_a_denial() -> None:
    assert refusals.find([event(KUBETUNE_CANNOT_CHECK, count=20)], "u1") is None


def test_transient_refusals_do_not_add_to_the_count_of_lasting_ones() -> None:
    found = refusals.find([event(QUOTA), event(UNREACHABLE[0], count=10)], "u1")
    assert found is not None and found.count == 1 and not found.persistent
    assert found.message == QUOTA


def test_a_denial_after_an_outage_is_still_final() -> None:
    events = [event(UNREACHABLE[1], count=5), event(WEBHOOK, when="2026-01-01T00:05:00Z")]
    found = refusals.find(events, "u1")
    assert found is not None and found.persistent and found.message == WEBHOOK
