"""The Pod that removes a FromVolume hostPath directory on the node that holds it (pure).

Why a Pod: the directory kubetune derived for a hostPath PV (prefix + PV name, recorded in the
PV's annotation `composing.CREATED_DIR`) lives on a node's filesystem, and the
suggestion-controller runs in a container of its own that never mounts it. So the finalizer
creates this short-lived Pod in the controller's own namespace, on that node, and lets the PV
go only once the Pod Succeeded.

The node: each node name a required `kubernetes.io/hostname` term of the PV's `nodeAffinity`
lists (one Pod per node, pinned with `nodeName`); a PV with other required terms gets them as
the Pod's node affinity; a PV with none (a one-node cluster) lets the scheduler choose.

Least privilege: the Pod mounts only the directory's parent (the configured prefix, `type:
Directory`, never created) and removes the one entry named after the PV; it runs as root with
every capability dropped except DAC_OVERRIDE (the prefix is root's, the files inside the
algorithm's), no privilege escalation, read-only root, no ServiceAccount token, no Service
links, small resources and a deadline. The image is katib-config's (`KatibConfig.cleanup_image`):
by default the algorithm's or bridge's own, which that node already pulled.

Retries: a Failed Pod (or one not finished within `STUCK_AFTER`) is reported as an Event on the
Suggestion and retried after `backoff(attempt)`; after `MAX_ATTEMPTS` the directory is left
(the Event names it) and the Suggestion is released. The attempt and the earliest time of the
next one are the Suggestion's annotation `ATTEMPT_ANNOTATION`; an admin who wants the
Suggestion gone at once sets `SKIP_ANNOTATION` to "true".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import posixpath
from dataclasses import dataclass
from typing import Any

from kubetune import naming
from kubetune.clock import rfc3339

Obj = dict[str, Any]

CONTAINER = "remove-directory"
VOLUME = "host-prefix"
MOUNT = "/kubetune-host-prefix"
HOSTNAME_KEY = "kubernetes.io/hostname"
APP_LABEL = "kubetune-hostpath-cleanup"
ATTEMPT_ANNOTATION = "kubetune.kubeflow.org/host-path-cleanup"
"""On the Suggestion being deleted: `<attempt> <not before, RFC 3339>` of the cleanup Pod."""
SKIP_ANNOTATION = "kubetune.kubeflow.org/skip-host-path-cleanup"
"""`"true"` on a Suggestion: its finalizer deletes the PV without removing the directory."""
PV_ANNOTATION = "kubetune.kubeflow.org/persistent-volume"
DIR_ANNOTATION = "kubetune.kubeflow.org/host-path"
DEADLINE_SECONDS = 120
"""activeDeadlineSeconds: the kubelet fails a Pod that runs (or pulls) longer."""
STUCK_AFTER = dt.timedelta(seconds=DEADLINE_SECONDS + 60)
"""A Pod not finished this long after creation (its node gone) counts as a failed attempt."""
POLL_SECONDS = 2.0
MAX_ATTEMPTS = 10
RESOURCES: Obj = {
    "requests": {"cpu": "10m", "memory": "16Mi"},
    "limits": {"cpu": "200m", "memory": "64Mi"},
}
SCRIPT = (
    "import os,shutil,sys\n"
    "p=sys.argv[1]\n"
    "if os.path.isdir(p) and not os.path.islink(p): shutil.rmtree(p)\n"
    "elif os.path.lexists(p): os.unlink(p)\n"
    "print('removed', p)\n"
)
"""Removes the one entry (a symlink is unlinked, never followed); exits non-zero on error."""


def root_with_only(capabilities: list[str]) -> Obj:
    """A container's securityContext: root with only ``capabilities``, no privilege escalation,
    a read-only root filesystem (what a host directory's owner change or removal needs)."""
    return {
        "runAsUser": 0,
        "runAsNonRoot": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": list(capabilities)},
    }


@dataclass(frozen=True)
class Target:
    """Where a directory lives: its parent (mounted), its name, and the node (None: any)."""

    parent: str
    entry: str
    node: str | None
    affinity: Obj | None = None


def targets(pv: Obj, path: str) -> list[Target]:
    """One Target per node the PV's required node affinity names (one with no node, or with
    the PV's other terms as affinity, when it names none)."""
    parent, entry = posixpath.split(posixpath.normpath(path))
    required = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")) or {}
    terms = required.get("nodeSelectorTerms") or []
    nodes: list[str] = []
    for term in terms:
        for expression in term.get("matchExpressions") or []:
            if expression.get("key") == HOSTNAME_KEY and expression.get("operator") == "In":
                nodes += [n for n in expression.get("values") or [] if n not in nodes]
    if nodes:
        return [Target(parent, entry, node) for node in nodes]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return [Target(parent, entry, None, affinity if terms else None)]


def pod_name(pv_name: str, node: str | None, attempt: int) -> str:
    """Stable for (PV, node, attempt), so a restarted controller finds the Pod it made."""
    digest = hashlib.sha256(f"{pv_name}\n{node or ''}".encode()).hexdigest()[:10]
    return f"{APP_LABEL}-{digest}-{attempt}"


def pod(
    pv_name: str,
    target: Target,
    attempt: int,
    *,
    namespace: str,
    image: str,
    pull_policy: str | None,
) -> Obj:
    spec: Obj = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "terminationGracePeriodSeconds": 5,
        "tolerations": [{"operator": "Exists"}],  # reach the node even if it is tainted now
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": pull_policy or "IfNotPresent",
                "command": ["python3", "-I", "-S", "-c", SCRIPT],
                "args": [f"{MOUNT}/{target.entry}"],
                "resources": RESOURCES,
                "securityContext": root_with_only(["DAC_OVERRIDE"]),
                "volumeMounts": [{"name": VOLUME, "mountPath": MOUNT}],
            }
        ],
        "volumes": [{"name": VOLUME, "hostPath": {"path": target.parent, "type": "Directory"}}],
    }
    if target.node:
        spec["nodeName"] = target.node
    elif target.affinity:
        spec["affinity"] = target.affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(pv_name, target.node, attempt),
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": APP_LABEL,
                "app.kubernetes.io/part-of": "kubetune",
                naming.ISTIO_INJECT: "false",
            },
            "annotations": {
                PV_ANNOTATION: pv_name,
                DIR_ANNOTATION: posixpath.join(target.parent, target.entry),
                naming.ISTIO_INJECT: "false",
            },
        },
        "spec": spec,
    }


def _parse_time(text: str) -> dt.datetime:
    """An RFC 3339 time (ValueError when it is not one)."""
    return dt.datetime.fromisoformat(text)


def backoff(attempt: int) -> dt.timedelta:
    """10 s after the first failure, doubling, at most 10 minutes."""
    return dt.timedelta(seconds=min(10 * 2 ** (attempt - 1), 600))


def attempt_of(annotations: dict[str, str] | None, now: dt.datetime) -> tuple[int, dt.datetime]:
    """(attempt, not before) from the Suggestion's annotation; (1, now) when absent or bad."""
    raw = (annotations or {}).get(ATTEMPT_ANNOTATION, "")
    number, _, when = raw.partition(" ")
    try:
        return max(1, int(number)), _parse_time(when)
    except ValueError:
        return 1, now


def next_attempt(attempt: int, failed_at: dt.datetime) -> str:
    """The annotation's value for the attempt after a failed `attempt`."""
    return f"{attempt + 1} {rfc3339(failed_at + backoff(attempt))}"


def finished(pod: Obj, now: dt.datetime) -> str | None:
    """`Succeeded`, `Failed` (also a Pod stuck past `STUCK_AFTER`), or None while it runs."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase in ("Succeeded", "Failed"):
        return str(phase)
    created = (pod.get("metadata") or {}).get("creationTimestamp")
    if created and now - _parse_time(created) > STUCK_AFTER:
        return "Failed"
    return None


def failure(pod: Obj) -> str:
    """Why a Pod failed, in one line: its reason and message, or its container's exit."""
    status = pod.get("status") or {}
    parts = [status.get("reason") or "", status.get("message") or ""]
    for container in status.get("containerStatuses") or []:
        done = (container.get("state") or {}).get("terminated") or {}
        if done:
            parts.append(f"exit code {done.get('exitCode')} {done.get('reason') or ''}".strip())
            if done.get("message"):
                parts.append(str(done["message"])[-300:])
    if not status.get("phase") or status.get("phase") == "Pending":
        parts.append(f"not finished {int(STUCK_AFTER.total_seconds())} s after creation")
    return "; ".join(p for p in parts if p) or "no reason given"
