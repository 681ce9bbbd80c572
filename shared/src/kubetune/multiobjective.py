"""Multi-objective Experiments (kubetune extension): `spec.objective.objectives`.

`objectives: [{metricName, type}, ...]` names two or more metrics optimised together; the first
is the Experiment's `objectiveMetricName`/`type` (the webhook fills those in from it, and refuses
a mismatch), so a Katib client reading the spec and `currentOptimalTrial` (the best trial by the
first objective) sees a valid single-objective Experiment. A manifest without the field is a
single-objective Experiment, exactly as in Katib.

Rules every reader agrees on, kept here:
- `targets(objective)`: the (metric, type) pairs, one for a single objective;
- `ALGORITHMS`: the algorithms that can search several objectives (the others are refused at
  admission and by the algorithm itself, by name);
- `goal` is refused with several objectives: one threshold cannot say when a trade-off is
  good enough;
- the Pareto front (`kubetune.pareto`) is taken over Succeeded trials whose every objective
  has a numeric value, and `status.paretoFront` holds at most `MAX_FRONT` of its trials.

Without pydantic: it reads any objective of the API's shape (the model, or a light one).
"""

from __future__ import annotations

from kubetune.api.literals import MAXIMIZE, UNKNOWN
from kubetune.typenames import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

ALGORITHMS = ("random", "grid", "sobol", "tpe", "multivariate-tpe", "nsga2", "nsga3")
"""Algorithms with a multi-objective mode: the objective-agnostic ones (random, grid, sobol),
Optuna's TPE in its multi-objective mode, and Optuna's NSGA-II and NSGA-III."""
MAX_FRONT = 100
"""Most trials `status.paretoFront` lists (the best first by the first objective);
`status.paretoFrontSize` counts them all."""
MAX_FRONT_BYTES = 256 * 1024
"""Most bytes (as compact JSON) the listed front takes: a trial's assignments and metrics may
hold long text, and the Experiment must stay far below etcd's request limit; the list stops
before the entry that would pass it."""


class TargetLike(Protocol):
    @property
    def metric_name(self) -> str: ...
    @property
    def type(self) -> str: ...  # an ObjectiveType


class MultiObjectiveLike(Protocol):
    @property
    def type(self) -> str | None: ...  # an ObjectiveType
    @property
    def objective_metric_name(self) -> str: ...
    @property
    def objectives(self) -> Sequence[TargetLike] | None: ...


def is_multi(objective: MultiObjectiveLike | None) -> bool:
    """Whether the objective lists its objectives (the kubetune extension is in use)."""
    return objective is not None and bool(objective.objectives)


def targets(objective: MultiObjectiveLike) -> list[tuple[str, str]]:
    """(metric name, type) of each objective, the first being the Experiment's objective; the
    type is the model's `ObjectiveType`, or `literals.UNKNOWN` for none."""
    if objective.objectives:
        return [(t.metric_name, t.type) for t in objective.objectives]
    return [(objective.objective_metric_name, objective.type or UNKNOWN)]


def maximized(objective: MultiObjectiveLike) -> list[bool]:
    """Per objective, whether it is maximised (the study's directions)."""
    return [kind == MAXIMIZE for _, kind in targets(objective)]


def refusal(algorithm: str) -> str | None:
    """Why `algorithm` cannot run a multi-objective Experiment, or None when it can."""
    if algorithm in ALGORITHMS:
        return None
    return (
        f"algorithm {algorithm} optimises a single objective; with spec.objective.objectives "
        f"use one of {', '.join(ALGORITHMS)}, or remove objectives"
    )


def minimised(values: Sequence[float], maximize: Sequence[bool]) -> tuple[float, ...]:
    """The values turned into ones to minimise (a maximised value negated), for `pareto`."""
    return tuple(-v if up else v for v, up in zip(values, maximize, strict=True))
