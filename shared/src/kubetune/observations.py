"""Metric logs to a Trial's `status.observation`, and an observation to an objective value.

The collector (and, for collector kinds without a sidecar, the trial-controller) summarises the
reported values of each metric with its strategy; the experiment-controller reads the objective
back to rank trials. Both sides live here so they agree.

Without pydantic: the functions read any objective and observation of the API's shape (the
models, or `Objective` and `ObservationSummary` here), and `summarise` makes the light one, so
the collector, started in every trial pod, never loads the models.
"""

from __future__ import annotations

import math

from kubetune import multiobjective
from kubetune.api.literals import LATEST, MAX, MAXIMIZE, MIN, MINIMIZE, UNKNOWN
from kubetune.metricbounds import (
    MAX_METRICS,
    MAX_NAME_CHARS,
    MAX_TEXT_CHARS,
    MAX_VALUE_CHARS,
    NUMBER_PATTERN,
    UNAVAILABLE,
    is_number,
    metric_error,
)
from kubetune.plain import Frozen, Plain
from kubetune.typenames import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any


class StrategyLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> str: ...  # a MetricStrategyType


class ObjectiveLike(Protocol):
    """What is read of an objective (`kubetune.api.common.ObjectiveSpec` or `Objective`)."""

    @property
    def type(self) -> str | None: ...  # an ObjectiveType
    @property
    def goal(self) -> float | None: ...
    @property
    def objective_metric_name(self) -> str: ...
    @property
    def additional_metric_names(self) -> Sequence[str] | None: ...
    @property
    def metric_strategies(self) -> Sequence[StrategyLike] | None: ...
    @property
    def objectives(self) -> Sequence[multiobjective.TargetLike] | None: ...


class MetricLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def min(self) -> str | None: ...
    @property
    def max(self) -> str | None: ...
    @property
    def latest(self) -> str | None: ...


class ObservationLike(Protocol):
    """What is read of an observation (`kubetune.api.common.Observation` or a summary)."""

    @property
    def metrics(self) -> Sequence[MetricLike] | None: ...


class Strategy(Frozen):
    __slots__ = ("name", "value")

    def __init__(self, name: str, value: str) -> None:  # value: min, max or latest
        self.name = name
        self.value = value


class Objective(Frozen):
    """An objective as the collector has it from its flags."""

    __slots__ = (
        "additional_metric_names",
        "goal",
        "metric_strategies",
        "objective_metric_name",
        "objectives",
        "type",
    )

    def __init__(
        self,
        objective_metric_name: str,
        type: str | None = None,  # noqa: A002 - the API's field name; an ObjectiveType
        goal: float | None = None,
        additional_metric_names: tuple[str, ...] = (),
        metric_strategies: tuple[Strategy, ...] = (),
        objectives: tuple[multiobjective.TargetLike, ...] = (),
    ) -> None:
        self.objective_metric_name = objective_metric_name
        self.type = type
        self.goal = goal
        self.additional_metric_names = additional_metric_names
        self.metric_strategies = metric_strategies
        self.objectives = objectives


class MetricSummary(Plain):
    __slots__ = ("latest", "max", "min", "name")

    def __init__(
        self,
        name: str,
        min: str | None = None,  # noqa: A002 - the API's field names
        max: str | None = None,  # noqa: A002
        latest: str | None = None,
    ) -> None:
        self.name = name
        self.min = min
        self.max = max
        self.latest = latest


class ObservationSummary(Plain):
    """`summarise`'s answer; `to_wire` is `status.observation` as the API stores it."""

    __slots__ = ("metrics",)

    def __init__(self, metrics: list[MetricSummary] | None = None) -> None:
        self.metrics: list[MetricSummary] = [] if metrics is None else metrics

    def to_wire(self) -> dict[str, Any]:
        return {
            "metrics": [
                {"name": m.name, "min": m.min, "max": m.max, "latest": m.latest}
                for m in self.metrics
            ]
        }


class MetricLog(Frozen):
    """One reported value; `timestamp` orders values (RFC3339 text or epoch seconds)."""

    __slots__ = ("name", "timestamp", "value")

    def __init__(self, name: str, value: str, timestamp: float = 0.0) -> None:
        self.name = name
        self.value = value
        self.timestamp = timestamp


def parse_number(value: str) -> float | None:
    """A finite float, or None for text, NaN and infinities (they cannot rank trials), and for
    anything outside `NUMBER_PATTERN`.

    The one rule for non-finite values, however written (`nan`, `inf`, `-Infinity`, or a
    number too large for a float such as `1e309`): a reported value is kept as reported in
    `latest`, but never becomes `min` or `max`, an objective value, the optimum or the goal.
    A trial whose objective only ever reported such values is not MetricsUnavailable (it
    reported), it just never ranks.
    """
    if not is_number(value):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def default_strategy(kind: str | None) -> str:
    """Upstream's default: `min` for minimize, `max` for maximize, else `latest`.

    Strategies and objective types are plain strings here (`kubetune.api.literals`), equal to
    the models' `StrEnum` members: the collector in every trial pod does not import `enum`."""
    return {MINIMIZE: MIN, MAXIMIZE: MAX}.get(kind or UNKNOWN, LATEST)


def strategies(objective: ObjectiveLike) -> dict[str, str]:
    """Metric name -> strategy, with upstream's type-based default for metrics without one;
    each of several objectives (`objectives`) by its own type, so they are all collected."""
    default = default_strategy(objective.type)
    names = [objective.objective_metric_name, *(objective.additional_metric_names or [])]
    out = {name: default for name in names if name}
    for target in objective.objectives or ():
        if target.metric_name:
            out[target.metric_name] = default_strategy(target.type)
    for strategy in objective.metric_strategies or []:
        out[strategy.name] = strategy.value
    return out


def summarise(objective: ObjectiveLike, logs: Iterable[MetricLog]) -> ObservationSummary:
    """min, max and latest of every metric of the objective; `unavailable` where none came."""
    wanted = strategies(objective)
    summary = {
        name: MetricSummary(name=name, min=UNAVAILABLE, max=UNAVAILABLE, latest=UNAVAILABLE)
        for name in wanted
    }
    latest_at: dict[str, float] = {}
    for log in logs:
        metric = summary.get(log.name)
        if metric is None:
            continue
        number = parse_number(log.value)
        if number is not None:
            low = parse_number(metric.min or "")
            high = parse_number(metric.max or "")
            if low is None or number < low:
                metric.min = log.value
            if high is None or number > high:
                metric.max = log.value
        if log.name not in latest_at or log.timestamp >= latest_at[log.name]:
            latest_at[log.name] = log.timestamp
            metric.latest = log.value
    return ObservationSummary(metrics=list(summary.values()))


def metric_value(metric: MetricLike, strategy: str) -> str:
    """The value a strategy selects; min/max fall back to latest when unavailable (upstream)."""
    chosen = {MIN: metric.min, MAX: metric.max, LATEST: metric.latest}[strategy]
    if chosen in (None, "", UNAVAILABLE):
        chosen = metric.latest
    return chosen or UNAVAILABLE


def objective_value(objective: ObjectiveLike, observation: ObservationLike | None) -> float | None:
    """The objective metric's value by its strategy, or None when not available or not numeric."""
    if observation is None:
        return None
    strategy = strategies(objective).get(objective.objective_metric_name, LATEST)
    for metric in observation.metrics or []:
        if metric.name == objective.objective_metric_name:
            return parse_number(metric_value(metric, strategy))
    return None


def objective_values(
    objective: ObjectiveLike, observation: ObservationLike | None
) -> list[float | None]:
    """Each objective's value (`multiobjective.targets`: one, or several) by its metric's
    strategy, None where not available or not numeric."""
    wanted = strategies(objective)
    metrics = {m.name: m for m in (observation.metrics if observation else None) or []}
    values: list[float | None] = []
    for name, _ in multiobjective.targets(objective):
        metric = metrics.get(name)
        strategy = wanted.get(name, LATEST)
        values.append(None if metric is None else parse_number(metric_value(metric, strategy)))
    return values


def is_available(objective: ObjectiveLike, observation: ObservationLike | None) -> bool:
    """Upstream's test: the objective's `latest` is reported (not `unavailable`)."""
    for metric in (observation.metrics if observation else None) or []:
        if metric.name == objective.objective_metric_name:
            return metric.latest not in (None, "", UNAVAILABLE)
    return False


def better(objective: ObjectiveLike, candidate: float, incumbent: float | None) -> bool:
    """Strictly better than the incumbent (ties keep the first), by the objective's type."""
    if incumbent is None:
        return True
    if objective.type == MINIMIZE:
        return candidate < incumbent
    return candidate > incumbent


def goal_reached(objective: ObjectiveLike, best: float | None) -> bool:
    if objective.goal is None or best is None:
        return False
    if objective.type == MINIMIZE:
        return best <= objective.goal
    return best >= objective.goal


__all__: Sequence[str] = [
    "MAX_METRICS",
    "MAX_NAME_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_VALUE_CHARS",
    "NUMBER_PATTERN",
    "UNAVAILABLE",
    "MetricLog",
    "MetricSummary",
    "Objective",
    "ObjectiveLike",
    "ObservationLike",
    "ObservationSummary",
    "Strategy",
    "better",
    "default_strategy",
    "goal_reached",
    "is_available",
    "is_number",
    "metric_error",
    "metric_value",
    "objective_value",
    "objective_values",
    "parse_number",
    "strategies",
    "summarise",
]
