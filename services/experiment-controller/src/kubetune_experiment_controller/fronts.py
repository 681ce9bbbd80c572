"""The Pareto front of a multi-objective Experiment (`status.paretoFront`), from the summaries.

The front is over Succeeded trials whose every objective has a numeric value (by its metric's
strategy, as the optimum is); EarlyStopped trials stopped before their last report, so they
are not compared with finished ones. `kubetune.pareto` finds the non-dominated points of two or
three objectives in a sort and a pass, so recomputing the front on every reconcile stays cheap
at 100,000 trials (`bench/pareto_front.py`). The status lists the front best-first by the
first objective, at most `multiobjective.MAX_FRONT` trials and `MAX_FRONT_BYTES`;
`paretoFrontSize` counts it all.

Neighbours: `summaries` (the trials and the optimum), `planning` (writes both into the status).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from kubetune import multiobjective, observations, pareto
from kubetune.api.common import (
    Metric,
    MetricStrategyType,
    ObjectiveSpec,
    Observation,
    ParameterAssignment,
)
from kubetune.api.experiment import ParetoTrial
from kubetune.conditions import TrialState
from kubetune_experiment_controller.summaries import (
    STRATEGY_FIELDS,
    TrialSummary,
    objective_field_value,
)


@dataclass(frozen=True)
class Front:
    trials: list[ParetoTrial]
    """The listed part, best first by the first objective."""
    size: int
    """Every trial of the front, listed or not."""


def front_members(objective: ObjectiveSpec, trials: Sequence[TrialSummary]) -> list[TrialSummary]:
    """The Succeeded trials no other one dominates, best first by the first objective (ties:
    the order given, `in_creation_order` in the controller)."""
    strategy = observations.strategies(objective)
    fields = [
        (name, STRATEGY_FIELDS[str(strategy.get(name, MetricStrategyType.LATEST))])
        for name, _ in multiobjective.targets(objective)
    ]
    maximize = multiobjective.maximized(objective)
    candidates: list[TrialSummary] = []
    points: list[tuple[float, ...]] = []
    for trial in trials:
        if trial.state is not TrialState.SUCCEEDED or not trial.metrics:
            continue
        values = [objective_field_value(name, field, trial.metrics) for name, field in fields]
        if any(v is None for v in values):
            continue
        candidates.append(trial)
        points.append(multiobjective.minimised([v for v in values if v is not None], maximize))
    return [candidates[i] for i in pareto.front(points)]


def entry(trial: TrialSummary) -> ParetoTrial:
    return ParetoTrial(
        trial_name=trial.name,
        parameter_assignments=[ParameterAssignment(name=n, value=v) for n, v in trial.assignments],
        observation=Observation(
            metrics=[
                Metric(name=n, min=lo, max=hi, latest=la) for n, lo, hi, la in trial.metrics or ()
            ]
        ),
    )


def pareto_front(objective: ObjectiveSpec, trials: Sequence[TrialSummary]) -> Front:
    """The front as the status lists it (bounded in entries and bytes) and its full size."""
    members = front_members(objective, trials)
    listed: list[ParetoTrial] = []
    used = 0
    for trial in members[: multiobjective.MAX_FRONT]:
        item = entry(trial)
        used += len(json.dumps(item.to_wire(), separators=(",", ":")))
        if used > multiobjective.MAX_FRONT_BYTES:
            break
        listed.append(item)
    return Front(trials=listed, size=len(members))
