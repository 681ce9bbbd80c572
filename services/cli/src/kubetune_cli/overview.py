"""`kubetune get EXPERIMENT`'s default view: what the Experiment's status says, and its active
Trials.

Listing every Trial costs the API server and the client time in proportion to the experiment
(28 s at 10,000 Trials, 70 s at 30,000), so this view reads one Experiment and GETs only the
Trials its status names as running or pending (as many as run in parallel). An experiment of
at most `limit` Trials is listed whole in one page, as a live table of a small search should be.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kubetune.api.common import ObjectiveType
from kubetune.api.experiment import Experiment
from kubetune.api.warmstart import WarmStartStatus
from kubetune.kube import Kube
from kubetune_cli import tables
from kubetune_cli.reading import (
    TrialRow,
    active_trials,
    best,
    counts,
    experiment_message,
    experiment_state,
    trial_pages,
)

DEFAULT_LIMIT = 50
"""Trial rows of the default view; an experiment of at most this many is listed whole."""

_WORDS = {
    "succeeded": "succeeded",
    "earlyStopped": "early stopped",
    "failed": "failed",
    "killed": "killed",
    "metricsUnavailable": "metrics unavailable",
    "running": "running",
    "pending": "pending",
}


@dataclass(frozen=True)
class Overview:
    experiment: Experiment
    counts: dict[str, int]
    rows: list[TrialRow]
    whole: bool
    """Every Trial was listed (a small experiment), not only the active ones."""

    @property
    def finished_unlisted(self) -> int:
        if self.whole:
            return 0
        finished = self.counts["trials"] - self.counts["running"] - self.counts["pending"]
        return max(0, finished)

    @property
    def active_unlisted(self) -> int:
        if self.whole:
            return 0
        return max(0, self.counts["running"] + self.counts["pending"] - len(self.rows))


def read(kube: Kube, experiment: Experiment, limit: int = DEFAULT_LIMIT) -> Overview:
    """The Experiment's counts and best trial, and at most `limit` trial rows."""
    numbers = counts(experiment)
    if numbers["trials"] <= limit:
        rows = [row for page in trial_pages(kube, experiment, limit) for row in page]
        rows.sort(key=lambda r: (r.created, r.name))
        return Overview(experiment, numbers, rows, whole=True)
    return Overview(experiment, numbers, active_trials(kube, experiment, limit), whole=False)


def _best_line(experiment: Experiment) -> str:
    optimal = best(experiment)
    if optimal is None:
        return "best: -"
    parts = [str(optimal.get("bestTrialName"))]
    assignments = optimal.get("parameterAssignments") or []
    parts += [f"{p['name']}={tables.readable(str(p['value']))}" for p in assignments]
    for metric in (optimal.get("observation") or {}).get("metrics") or []:
        latest, low, high = (
            tables.readable(metric.get(k) or "-") for k in ("latest", "min", "max")
        )
        parts.append(f"{metric['name']}={latest} (min {low}, max {high})")
    return "best: " + "  ".join(parts)


def warm_start_line(warm: WarmStartStatus) -> str:
    """Known results are not trials: said apart from the trial counts."""
    sources = ", ".join(f"{s.kind} {s.name}" for s in warm.sources or [])
    return (
        f"warm start: {warm.imported} imported, {warm.skipped} skipped (known results, not "
        f"trials{'; from ' + sources if sources else ''})"
    )


def text(overview: Overview) -> str:
    experiment = overview.experiment
    meta = experiment.metadata
    state = experiment_state(experiment)
    message = experiment_message(experiment)
    head = f"experiment {meta.namespace}/{meta.name}: {state}"
    lines = [f"{head} ({message})" if message else head]
    by_state = [f"{overview.counts[k]} {word}" for k, word in _WORDS.items() if overview.counts[k]]
    total = f"trials: {overview.counts['trials']}"
    lines.append(total + (f" ({', '.join(by_state)})" if by_state else ""))
    warm = experiment.status.warm_start if experiment.status else None
    if warm is not None:
        lines.append(warm_start_line(warm))
    lines.append(_best_line(experiment))
    if overview.rows:
        objective = experiment.spec.objective
        metric = objective.objective_metric_name if objective else None
        lines.append(tables.trial_table(overview.rows, metric or "objective"))
    if overview.active_unlisted:
        lines.append(
            f"{overview.active_unlisted} more running or pending trials not listed: "
            "--limit to show more"
        )
    if overview.finished_unlisted:
        objective = experiment.spec.objective
        maximize = objective is not None and objective.type == ObjectiveType.MAXIMIZE
        best_first = "--sort-by metric --descending" if maximize else "--sort-by metric"
        lines.append(
            f"{overview.finished_unlisted} finished trials not listed: --all lists every trial, "
            f"{best_first} --limit 10 the ten best"
        )
    return "\n".join(lines)


def as_json(overview: Overview) -> dict[str, Any]:
    experiment = overview.experiment
    out = {
        "name": experiment.metadata.name,
        "namespace": experiment.metadata.namespace,
        "state": experiment_state(experiment),
        "message": experiment_message(experiment),
        "counts": overview.counts,
        "best": best(experiment),
        "trials": [asdict(row) for row in overview.rows],
        "unlisted": overview.finished_unlisted + overview.active_unlisted,
    }
    if experiment.status and experiment.status.warm_start:
        out["warmStart"] = experiment.status.warm_start.to_wire()
    return out
