"""Read an Experiment and its Trials into plain rows for tables, JSON and plots."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubetune import conditions, naming, observations
from kubetune.api.experiment import Experiment
from kubetune.api.trial import Trial
from kubetune.kube import EXPERIMENTS, TRIALS, Kube


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


def state_of(trial: Trial) -> str:
    """The trial's state as the Experiment counts it (not its last condition: see
    `conditions.trial_state`), so a listing agrees with the Experiment's status."""
    return conditions.trial_state(trial.status.conditions if trial.status else None).value


def experiment_state(experiment: Experiment) -> str:
    conds = (experiment.status.conditions if experiment.status else None) or []
    return conds[-1].type if conds else "Pending"


def get_experiment(kube: Kube, name: str, namespace: str) -> Experiment:
    obj = kube.get_or_none(EXPERIMENTS, name, namespace)
    if obj is None:
        raise UserError(f"no experiment {name!r} in namespace {namespace!r}")
    return Experiment.model_validate(obj)


def list_trials(kube: Kube, experiment: Experiment) -> list[TrialRow]:
    name = experiment.metadata.name or ""
    namespace = experiment.metadata.namespace
    selector = f"{naming.LABEL_EXPERIMENT}={naming.label_value(name)}"
    objective = experiment.spec.objective
    rows = []
    for obj in kube.list_all(TRIALS, namespace, label_selector=selector):
        trial = Trial.model_validate(obj)
        observation = trial.status.observation if trial.status else None
        metrics = {
            m.name: m.latest or "" for m in (observation.metrics if observation else None) or []
        }
        rows.append(
            TrialRow(
                name=trial.metadata.name or "",
                state=state_of(trial),
                parameters={p.name: p.value for p in trial.spec.parameter_assignments or []},
                objective=observations.objective_value(objective, observation)
                if objective
                else None,
                created=trial.metadata.creation_timestamp or "",
                metrics=metrics,
            )
        )
    return sorted(rows, key=lambda r: (r.created, r.name))


def best(experiment: Experiment) -> dict[str, Any] | None:
    optimal = experiment.status.current_optimal_trial if experiment.status else None
    if optimal is None or not optimal.best_trial_name:
        return None
    return optimal.to_wire()
