"""Read an Experiment and its Trials into plain rows for tables, JSON and plots."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubetune import conditions, naming, observations
from kubetune.api.common import ObjectiveSpec
from kubetune.api.experiment import Experiment, ExperimentStatus
from kubetune.api.trial import Trial
from kubetune.kube import EXPERIMENTS, TRIALS, Kube, Obj

PAGE = 500
GETS_AT_ONCE = 8

COUNTS = {
    "trials": "trials",
    "succeeded": "trials_succeeded",
    "earlyStopped": "trials_early_stopped",
    "failed": "trials_failed",
    "killed": "trials_killed",
    "metricsUnavailable": "trial_metrics_unavailable",
    "running": "trials_running",
    "pending": "trials_pending",
}
"""The count keys of `kubetune get -o json` and the status fields they come from."""


class UserError(Exception):
    """A problem the user can fix, said in their terms (no traceback)."""


@dataclass(frozen=True)
class TrialRow:
    name: str
    state: str
    parameters: dict[str, str]
    objective: float | None
    created: str
    metrics: dict[str, str] = field(default_factory=dict)
    values: tuple[float | None, ...] = ()
    """Each objective's value (several with `spec.objective.objectives`, else one)."""


def state_of(trial: Trial) -> str:
    """The trial's state as the Experiment counts it (not its last condition: see
    `conditions.trial_state`), so a listing agrees with the Experiment's status."""
    return conditions.trial_state(trial.status.conditions if trial.status else None).value


def experiment_state(experiment: Experiment) -> str:
    conds = (experiment.status.conditions if experiment.status else None) or []
    return conds[-1].type if conds else "Pending"


def experiment_message(experiment: Experiment) -> str:
    conds = (experiment.status.conditions if experiment.status else None) or []
    return (conds[-1].message or "") if conds else ""


def get_experiment(kube: Kube, name: str, namespace: str) -> Experiment:
    obj = kube.get_or_none(EXPERIMENTS, name, namespace)
    if obj is None:
        raise UserError(f"no experiment {name!r} in namespace {namespace!r}")
    return Experiment.model_validate(obj)


def _selector(experiment: Experiment) -> str:
    return f"{naming.LABEL_EXPERIMENT}={naming.label_value(experiment.metadata.name or '')}"


def row_of(obj: Obj, objective: ObjectiveSpec | None) -> TrialRow:
    trial = Trial.model_validate(obj)
    observation = trial.status.observation if trial.status else None
    metrics = {m.name: m.latest or "" for m in (observation.metrics if observation else None) or []}
    return TrialRow(
        name=trial.metadata.name or "",
        state=state_of(trial),
        parameters={p.name: p.value for p in trial.spec.parameter_assignments or []},
        objective=observations.objective_value(objective, observation) if objective else None,
        created=trial.metadata.creation_timestamp or "",
        metrics=metrics,
        values=tuple(observations.objective_values(objective, observation)) if objective else (),
    )


def trial_pages(
    kube: Kube, experiment: Experiment, limit: int | None = None
) -> Iterator[list[TrialRow]]:
    """The experiment's Trials a page at a time in the API server's order (by name), at most
    `limit`: the first rows print while the rest are still being read."""
    objective = experiment.spec.objective
    for page in kube.pages(
        TRIALS,
        experiment.metadata.namespace,
        label_selector=_selector(experiment),
        page_size=PAGE,
        limit=limit,
    ):
        yield [row_of(obj, objective) for obj in page]


def list_trials(kube: Kube, experiment: Experiment) -> list[TrialRow]:
    """Every Trial of the experiment, oldest first (reads them all: on request only)."""
    rows = [row for page in trial_pages(kube, experiment) for row in page]
    return sorted(rows, key=lambda r: (r.created, r.name))


def counts(experiment: Experiment) -> dict[str, int]:
    """The Experiment status's trial counts by state (the experiment-controller's, exact)."""
    status = experiment.status or ExperimentStatus()
    return {key: int(getattr(status, attribute) or 0) for key, attribute in COUNTS.items()}


def active_trials(kube: Kube, experiment: Experiment, limit: int) -> list[TrialRow]:
    """The Trials the status names as pending or running (at most `limit`, oldest first), read
    one GET each: as many requests as trials run in parallel, whatever the experiment's size.
    A Trial deleted since the status was written is left out."""
    status = experiment.status or ExperimentStatus()
    names = [*(status.pending_trial_list or []), *(status.running_trial_list or [])]
    names = list(dict.fromkeys(names))[:limit]
    namespace = experiment.metadata.namespace
    if not names:
        return []
    with ThreadPoolExecutor(min(GETS_AT_ONCE, len(names))) as pool:
        found = list(pool.map(lambda n: kube.get_or_none(TRIALS, n, namespace), names))
    objective = experiment.spec.objective
    rows = [row_of(obj, objective) for obj in found if obj is not None]
    return sorted(rows, key=lambda r: (r.created, r.name))


def best(experiment: Experiment) -> dict[str, Any] | None:
    optimal = experiment.status.current_optimal_trial if experiment.status else None
    if optimal is None or not optimal.best_trial_name:
        return None
    return optimal.to_wire()
