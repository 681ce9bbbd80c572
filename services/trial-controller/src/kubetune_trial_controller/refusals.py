"""Pods that are refused: a job whose pods the API server keeps refusing fails its Trial.

Why: a batch Job (and the operators of other kinds) only records a Warning Event (reason
`FailedCreate`; the Kubeflow training operator says `FailedCreatePod`) and retries for ever, so
without this a Trial whose pods a webhook, a ValidatingAdmissionPolicy or a quota refuses stays
Running for ever and never counts toward maxFailedTrialCount.

When is a refusal final? A denial by admission (a webhook, a ValidatingAdmissionPolicy, Pod
Security) is deterministic: the same pod template is refused again, so the first one fails the
Trial. A refusal because admission could not decide is not a verdict at all and never counts,
however long it lasts: a webhook the API server cannot call (`failed calling webhook`: down,
no endpoints, timed out, connection refused or reset; the server words it as an internal error)
or kubetune's own webhook answering "cannot check now" (code 500, which the Event does not show:
its message carries `kubetune.admission.TRANSIENT`). Anything else (an exceeded quota, a
ServiceAccount not created yet) may pass later, so it fails the Trial only once the job's
refusals have been counted `PERSISTENT_COUNT` times (the Job controller retries after 10 s,
20 s, 40 s..., so that is more than half a minute of refusals).
Neighbours: `main` watches the Events (one informer per reason); `reconciling` asks `find` for
a running job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kubetune import admission
from kubetune.kube import Obj
from kubetune.runtime import Key
from kubetune.runtime.context import Mapper

REASONS = ("FailedCreate", "FailedCreatePod")
PERSISTENT_COUNT = 3
# Substrings of the API server's refusals that come from admission and so repeat for ever.
ADMISSION_DENIALS = (
    "denied the request",  # admission webhook "<name>" denied the request: ...
    "ValidatingAdmissionPolicy",  # ... ValidatingAdmissionPolicy '<name>' ... denied request
    "violates PodSecurity",
)
# Lower-case substrings of refusals that say admission could not decide (never counted).
ADMISSION_FAILURES = (
    "failed calling webhook",  # Internal error occurred: failed calling webhook "<name>": ...
    "internal error occurred",
    "context deadline exceeded",
    "connection refused",
    "connection reset",
    "no endpoints available",
    "service unavailable",
)


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str
    count: int
    admission: bool

    @property
    def persistent(self) -> bool:
        return self.admission or self.count >= PERSISTENT_COUNT


def event_keys(kinds: Iterable[str]) -> Mapper:
    """A mapper from a refusal Event to the Trial of its job (the job has the Trial's name)."""
    wanted = frozenset(kinds)

    def keys(obj: Obj) -> list[Key]:
        involved = obj.get("involvedObject") or obj.get("regarding") or {}
        if involved.get("kind") not in wanted or not involved.get("name"):
            return []
        namespace = involved.get("namespace") or (obj.get("metadata") or {}).get("namespace")
        return [Key(namespace or "", involved["name"])]

    return keys


def _count(event: Obj) -> int:
    series = event.get("series") or {}
    return max(int(event.get("count") or 0), int(series.get("count") or 0), 1)


def _stamp(event: Obj) -> str:
    return str(
        (event.get("series") or {}).get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _message(event: Obj) -> str:
    return str(event.get("message") or event.get("note") or "")


def _is_transient(event: Obj) -> bool:
    message = _message(event)
    lowered = message.lower()
    return admission.is_transient(message) or any(f in lowered for f in ADMISSION_FAILURES)


def _is_denial(event: Obj) -> bool:
    message = _message(event)
    return any(d in message for d in ADMISSION_DENIALS)


def find(events: Iterable[Obj], job_uid: str) -> Refusal | None:
    """The refusals recorded on the job with `job_uid`: their total count and the latest one.

    Refusals where admission could not decide are left out: they say nothing of the pods."""
    mine = [
        e
        for e in events
        if e.get("reason") in REASONS
        and ((e.get("involvedObject") or e.get("regarding") or {}).get("uid") == job_uid)
        and not _is_transient(e)
    ]
    if not mine or not job_uid:
        return None
    denials = [e for e in mine if _is_denial(e)]
    latest = max(denials or mine, key=_stamp)
    return Refusal(
        reason=str(latest.get("reason")),
        message=_message(latest),
        count=sum(_count(e) for e in mine),
        admission=bool(denials),
    )
