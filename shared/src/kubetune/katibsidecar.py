"""Pods that Katib's own webhook mutated: their collector sidecar, told from kubetune's.

Both webhooks name the sidecar `metrics-logger-and-collector`; Katib's collectors take short
Go flags and always get `-s-db` (the address of Katib's db-manager), kubetune's collector long
ones (`--trial-name`). Such a pod's training command is already wrapped by Katib and its
metrics go to Katib's db-manager: kubetune neither injects into it (a second wrapper and a
second sidecar) nor can collect its metrics, so a Trial running such pods is reported by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SIDECAR_NAME = "metrics-logger-and-collector"
DB_MANAGER_FLAG = "-s-db"
KATIB_WEBHOOK = "katib.kubeflow.org"
"""The name of Katib's MutatingWebhookConfiguration and ValidatingWebhookConfiguration."""

WHAT_TO_DO = (
    "delete the Trial (after `kubetune katib-check --release-finalizers`: Katib's finalizer "
    "would hold it), kubetune then runs a new Trial in its place with its own collector; or "
    "let it finish: its metrics then reach only Katib's database"
)


def katib_sidecar(pod: Mapping[str, Any]) -> str | None:
    """The name of the pod's container that is Katib's metrics collector, or None."""
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for container in containers if isinstance(containers, list) else []:
        if not isinstance(container, Mapping) or container.get("name") != SIDECAR_NAME:
            continue
        args = container.get("args")
        if isinstance(args, list) and DB_MANAGER_FLAG in args:
            return SIDECAR_NAME
    return None


def slim_spec(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a cache that drops pod specs keeps so `katib_sidecar` still answers: the sidecar's
    name and Katib's flag (None for any other pod: nothing to keep)."""
    if katib_sidecar(pod) is None:
        return None
    return {"containers": [{"name": SIDECAR_NAME, "args": [DB_MANAGER_FLAG]}]}
