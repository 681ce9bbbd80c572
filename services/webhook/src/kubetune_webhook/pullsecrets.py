"""The image pull secrets of the pod being admitted: its own, then its ServiceAccount's.

Only the pod under admission's secrets are read, by name, in its namespace, and only when one of
its containers needs its command read from the registry (`imagecommand`). A named Secret or
ServiceAccount that does not exist is skipped, as the kubelet skips it; one that cannot be read
raises `validating.ClusterError` (the admission is retried).

Neighbours: `lookups` (the real `Reader`), `reviewing` (calls `read`).
"""

from __future__ import annotations

from typing import Any, Protocol

from kubetune import errors


class Reader(Protocol):
    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret, None when it does not exist; raises `validating.ClusterError`."""
        ...

    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ServiceAccount, None when it does not exist; raises `validating.ClusterError`."""
        ...


def _names(refs: Any) -> list[str]:
    if not isinstance(refs, list):
        return []
    return [str(r["name"]) for r in refs if isinstance(r, dict) and r.get("name")]


def read(pod: dict[str, Any], namespace: str, reader: Reader) -> list[dict[str, Any]]:
    """The Secrets named by the pod's `imagePullSecrets`, then by its ServiceAccount's."""
    spec = pod.get("spec") or {}
    names = _names(spec.get("imagePullSecrets"))
    account = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")
    try:
        found = reader.service_account(namespace, account)
    except errors.InvalidName:
        found = None
    names += _names((found or {}).get("imagePullSecrets"))
    secrets = []
    for name in dict.fromkeys(names):
        try:
            secret = reader.secret(namespace, name)
        except errors.InvalidName:
            continue
        if secret is not None:
            secrets.append(secret)
    return secrets
