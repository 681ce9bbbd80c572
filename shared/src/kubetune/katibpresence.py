"""Katib's components that must not run beside kubetune, each with the command that removes it.

Why: kubetune serves the same CRDs. While Katib's webhook configurations exist, Katib's webhook
injects its collector into trial pods too (two wrappers, two sidecars if both injected); while
its controller or db-manager runs, both act on every Experiment and contest the Service
`katib-db-manager`. `kubetune katib-check` and the webhook's start-up guard name the same
objects with the same commands, from here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubetune.katibsidecar import KATIB_WEBHOOK
from kubetune.kube import MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS, Kube

KATIB_DEPLOYMENTS = ("katib-controller", "katib-db-manager")
"""Katib's Deployments that contend with kubetune's (its UI and database may stay)."""

Finding = tuple[str, str]
"""(what is there, the command that removes it)."""


def webhook_configurations(kube: Kube) -> Iterator[Finding]:
    """Katib's MutatingWebhookConfiguration and ValidatingWebhookConfiguration, if present
    (read by name: `get` on that one name is all it needs)."""
    for res, kind in (
        (MUTATING_WEBHOOK_CONFIGURATIONS, "mutatingwebhookconfiguration"),
        (VALIDATING_WEBHOOK_CONFIGURATIONS, "validatingwebhookconfiguration"),
    ):
        if kube.get_or_none(res, KATIB_WEBHOOK) is not None:
            yield (
                f"{res.kind} {KATIB_WEBHOOK} (Katib's webhook)",
                f"kubectl delete {kind} {KATIB_WEBHOOK}",
            )


def deployment(obj: Mapping[str, Any]) -> Finding | None:
    """The Deployment as a finding when it is one of Katib's contending ones, else None."""
    meta = obj["metadata"]
    if meta["name"] not in KATIB_DEPLOYMENTS:
        return None
    return (
        f"Deployment {meta['namespace']}/{meta['name']} (Katib's)",
        f"kubectl -n {meta['namespace']} delete deployment {meta['name']}",
    )
