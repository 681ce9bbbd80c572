"""Who may write a Trial's status (`/validate-trial-status`): a trial pod writes its own Trial only.

RBAC cannot say "the pod's own Trial": the collector RoleBinding lets the namespace's service
accounts patch `trials/status` of every Trial there. The API server tells who is calling, though:
a bound service-account token (the one a pod gets) carries `authentication.kubernetes.io/pod-name`
and `.../pod-uid` in the request's user info; a token from `kubectl create token` carries none.

A write by a service account of the Trial's own namespace (anyone a trial pod could run as) that
is not one of kubetune's trusted writers (its controllers) is admitted only when:

1. the token names a pod, the pod exists with that uid, and the pod's chain of controller
   references ends at the job the trial-controller made for this Trial (`kubetune.trialpods`).
   The label the pod webhook sets is not used: the creator of a pod chooses its labels.
2. the write changes `status.observation`, `status.metricHistory` (the collector's bounded
   history, issue 15) and the `EarlyStopped` condition only (one writer per
   field, docs/reference/crds.md): conditions, times and the rest belong to the trial-controller.
3. what it writes there is bounded (`kubetune.statusbounds`: the number of metrics, the length
   and grammar of names and values, the history's size). Training code holds the pod's token:
   without this it could store megabytes in its Trial, which the experiment-controller then
   copies and caches.

Every other requester (people, controllers of other namespaces) is left to RBAC. A lookup that
fails is a denial with code 500: the collector retries it; a refusal is code 403.

Neighbours: `reviewing` (the admission plumbing), `main` (the trusted writers flag).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubetune import statusbounds
from kubetune.trialpods import (
    POD_NAME,
    POD_UID,
    CannotCheck,
    KubeReader,
    Reader,
    trial_of_pod,
)
from kubetune.trialpods import meta as _meta
from kubetune.trialpods import one_extra as _one

__all__ = [
    "POD_NAME",
    "POD_UID",
    "CannotCheck",
    "KubeReader",
    "Reader",
    "authorize",
    "trial_of_pod",
    "trusted_users",
]

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
EARLY_STOPPED = "EarlyStopped"
POD_MAY_CHANGE = ("observation", "metricHistory")
DEFAULT_TRUSTED = ("kubetune-trial-controller",)
"""The one kubetune controller that writes Trial status (its conditions)."""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    message: str = ""
    code: int = 403


ALLOW = Verdict(True)


def trusted_users(entries: Iterable[str], namespace: str) -> frozenset[str]:
    """Usernames from `--trusted-status-writers`: a bare name is a service account of the
    webhook's own namespace; anything with a `:` is taken as a full username."""
    out = set()
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        out.add(entry if ":" in entry else f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{entry}")
    return frozenset(out)


def _status(obj: Any) -> dict[str, Any]:
    status = obj.get("status") if isinstance(obj, dict) else None
    return status if isinstance(status, dict) else {}


def _changes(old: Any, new: Any) -> list[str]:
    """The status fields a write changes that a trial pod may not change."""
    old_status, new_status = _status(old), _status(new)
    changed = []
    for key in sorted(set(old_status) | set(new_status)):
        if key in POD_MAY_CHANGE or key == "conditions":
            continue
        if old_status.get(key) != new_status.get(key):
            changed.append(f"status.{key}")

    def others(status: dict[str, Any]) -> list[Any]:
        return [
            c
            for c in status.get("conditions") or []
            if not (isinstance(c, dict) and c.get("type") == EARLY_STOPPED)
        ]

    if others(old_status) != others(new_status):
        changed.append("status.conditions (other than EarlyStopped)")
    return changed


def authorize(request: dict[str, Any], trusted: frozenset[str], reader: Reader) -> Verdict:
    """May the requester of this `trials/status` UPDATE or PATCH make it?"""
    namespace = str(request.get("namespace") or "")
    obj, old = request.get("object"), request.get("oldObject")
    trial = str(request.get("name") or _meta(obj).get("name") or "")
    user = request.get("userInfo") if isinstance(request.get("userInfo"), dict) else {}
    assert isinstance(user, dict)
    username = str(user.get("username") or "")
    if not username.startswith(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:") or username in trusted:
        return ALLOW
    account = username.rsplit(":", 1)[-1]
    extra = user.get("extra")
    pod_name, pod_uid = _one(extra, POD_NAME), _one(extra, POD_UID)
    if not pod_name or not pod_uid:
        return Verdict(
            False,
            f"service account {account} may write the status of Trial {trial} only from that "
            "Trial's own pod, with the token the pod was given; this token names no pod "
            "(e.g. one from `kubectl create token`)",
        )
    try:
        pod = reader.pod(namespace, pod_name)
        if pod is None or _meta(pod).get("uid") != pod_uid:
            return Verdict(
                False,
                f"pod {pod_name} (uid {pod_uid}) no longer exists; only a running pod of "
                f"Trial {trial} may write its status",
            )
        owner = trial_of_pod(pod, namespace, reader)
    except CannotCheck as e:
        return Verdict(
            False, f"cannot check that pod {pod_name} belongs to Trial {trial}: {e}; retry", 500
        )
    trial_uid = _meta(obj).get("uid") or _meta(old).get("uid")
    if owner is None:
        return Verdict(
            False,
            f"pod {pod_name} belongs to no Trial and may not write the status of Trial {trial}",
        )
    if owner[1] != trial_uid:
        return Verdict(
            False, f"pod {pod_name} of Trial {owner[0]} may not write the status of Trial {trial}"
        )
    changed = _changes(old, obj)
    if changed:
        return Verdict(
            False,
            f"pod {pod_name} of Trial {trial} may change only status.observation and the "
            f"{EARLY_STOPPED} condition (the trial-controller owns the rest); it changed "
            + ", ".join(changed),
        )
    # Only the fields the write changes: an EarlyStopped condition is not refused over an
    # observation stored before the bounds.
    bounds = statusbounds.status_error(_status(obj), _status(old))
    if bounds:
        return Verdict(
            False, f"pod {pod_name} of Trial {trial} may not write this status: {bounds}"
        )
    return ALLOW
