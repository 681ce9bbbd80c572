"""`kubetune katib-check`: whether kubetune can take over from Katib on this cluster, now.

kubetune and Katib serve the same CRDs: while Katib's controller runs, both act on every
Experiment; while Katib's webhook configurations exist, Katib injects its collector into trial
pods (kubetune's webhook then leaves such pods alone); while Katib's db-manager runs, the Service
`katib-db-manager` that both use is contested. So this check refuses (exit 1) while any of them
is there, naming each with the command that removes it. Experiments, Suggestions and Trials
stay: kubetune continues them. Trials still running pods that Katib's webhook injected are
listed by name: kubetune cannot collect their metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kubetune import conditions, errors, katibpresence, katibsidecar, naming
from kubetune.conditions import TrialState
from kubetune.kube import (
    DEPLOYMENTS,
    PODS,
    TRIALS,
    Kube,
    Obj,
    Resource,
)
from kubetune_cli import katibfinalizers

SHOWN = 20
"""Objects named per kind of finding; the rest are counted."""


@dataclass
class Findings:
    blocking: list[tuple[str, str]] = field(default_factory=list)  # (what, the command)
    katib_trials: list[tuple[str, list[str]]] = field(default_factory=list)  # (trial, pods)
    finalizers: list[katibfinalizers.Held] = field(default_factory=list)

    def text(self) -> str:
        lines = []
        if self.blocking:
            lines.append("Katib still runs here; kubetune must not run beside it. Remove:")
            lines += [f"  {what}: {command}" for what, command in self.blocking]
            lines.append(
                "(Experiments, Suggestions and Trials stay: kubetune continues them; the CRDs "
                "stay too, kubetune's apply replaces them)"
            )
        else:
            lines.append("no Katib controller, db-manager or webhook configuration found")
        for trial, pods in self.katib_trials:
            lines.append(
                f"trial {trial} cannot be taken over: its pod(s) {', '.join(pods)} carry "
                f"Katib's metrics collector; {katibsidecar.WHAT_TO_DO}"
            )
        if self.finalizers:
            named = ", ".join(str(h) for h in self.finalizers[:SHOWN])
            more = len(self.finalizers) - SHOWN
            lines.append(
                f"{len(self.finalizers)} objects hold a finalizer only Katib's controller removes "
                f"(deleting them would hang): {named}"
                + (f" and {more} more" if more > 0 else "")
                + "; run `kubetune katib-check --release-finalizers` once Katib is removed"
            )
        return "\n".join(lines)


def _listed(kube: Kube, res: Resource, namespace: str | None = None) -> list[Obj]:
    try:
        return kube.list_all(res, namespace)
    except errors.NotFound:
        return []


def _katib_components(kube: Kube) -> Iterator[tuple[str, str]]:
    yield from katibpresence.webhook_configurations(kube)
    for obj in _listed(kube, DEPLOYMENTS):
        found = katibpresence.deployment(obj)
        if found is not None:
            yield found


def _katib_trials(kube: Kube, namespace: str | None) -> Iterator[tuple[str, list[str]]]:
    """Active Trials with a Katib-injected pod: pods are read per namespace, by trial label."""
    by_trial: dict[tuple[str, str], list[str]] = {}
    for page in kube.pages(PODS, namespace, label_selector=naming.LABEL_TRIAL):
        for pod in page:
            if katibsidecar.katib_sidecar(pod) is None:
                continue
            meta = pod["metadata"]
            trial = (meta.get("labels") or {}).get(naming.LABEL_TRIAL, "")
            by_trial.setdefault((meta["namespace"], trial), []).append(meta["name"])
    for (ns, name), pods in sorted(by_trial.items()):
        trial = kube.get_or_none(TRIALS, name, ns)
        if trial is None:
            continue
        state = conditions.trial_state((trial.get("status") or {}).get("conditions"))
        if state in (TrialState.RUNNING, TrialState.PENDING):
            yield f"{ns}/{name}", sorted(pods)


def check(kube: Kube, namespace: str | None) -> Findings:
    """Katib's components anywhere; Katib-injected Trials and Katib's finalizers in
    `namespace` (None: all)."""
    return Findings(
        list(_katib_components(kube)),
        list(_katib_trials(kube, namespace)),
        list(katibfinalizers.held(kube, namespace)),
    )
