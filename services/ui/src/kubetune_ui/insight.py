"""What the experiment page's study charts draw: slices, the objective's empirical distribution,
intermediate values, a contour of two parameters and the Pareto front, from the raw objects.

Every answer is bounded whatever the number of trials: point clouds are an evenly spaced sample
of at most `Limits.points` trials (the page says "N of M"), curves at most `Limits.curves`
trials of at most `Limits.curve_points` points, the distribution at most `Limits.edf_points`
steps, and the contour an aggregate of at most `Limits.bins` x `Limits.bins` cells.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from kubetune import conditions, observations
from kubetune.api.common import ObjectiveSpec
from kubetune_ui.views import Ranker, objective_spec

Obj = dict[str, Any]
T = TypeVar("T")
SUCCEEDED = conditions.TrialState.SUCCEEDED.value
EARLY_STOPPED = conditions.TrialState.EARLY_STOPPED.value
FINISHED = frozenset(
    s.value
    for s in (
        conditions.TrialState.SUCCEEDED,
        conditions.TrialState.EARLY_STOPPED,
        conditions.TrialState.FAILED,
        conditions.TrialState.KILLED,
        conditions.TrialState.METRICS_UNAVAILABLE,
    )
)
NUMERIC = frozenset({"double", "int", "discrete"})


@dataclass(frozen=True)
class Limits:
    """How much one chart may carry, whatever the experiment's size."""

    points: int = 2000
    curves: int = 200
    curve_points: int = 200
    edf_points: int = 1000
    bins: int = 30
    front: int = 1000


class BadQuery(ValueError):
    """A query the experiment cannot answer (400): the message names the field and the fix."""


@dataclass(frozen=True)
class Parameter:
    """One search-space parameter as the charts need it."""

    name: str
    type: str
    log: bool = False
    choices: tuple[str, ...] = ()

    @property
    def numeric(self) -> bool:
        return self.type in NUMERIC

    def value(self, raw: object) -> float | str | None:
        """The assignment as a number (numeric types) or its text; None when unreadable."""
        if not self.numeric:
            return None if raw is None else str(raw)
        number = observations.parse_number(str(raw))
        if number is None:
            return None
        return float(round(number)) if self.type == "int" else number

    def as_json(self) -> Obj:
        return {"name": self.name, "type": self.type, "log": self.log, "choices": self.choices}


@dataclass
class Point:
    """One trial: its name, state, parameter values (by name) and objective value."""

    name: str
    state: str
    params: dict[str, float | str]
    value: float | None
    status: Mapping[str, Any] = field(repr=False, default_factory=dict)


@dataclass
class Study:
    """An experiment's trials in creation order, with the objective read by its strategy."""

    parameters: list[Parameter]
    objective: ObjectiveSpec | None
    points: list[Point]

    @property
    def metric(self) -> str:
        return (self.objective.objective_metric_name or "") if self.objective else ""

    @property
    def maximize(self) -> bool:
        return bool(self.objective and self.objective.type and self.objective.type == "maximize")

    def succeeded(self) -> list[Point]:
        return [p for p in self.points if p.state == SUCCEEDED and p.value is not None]

    def parameter(self, name: str, query: str) -> Parameter:
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        known = ", ".join(p.name for p in self.parameters) or "none"
        shown = name if len(name) <= 64 else name[:64] + "..."
        raise BadQuery(f"{query}: {shown!r} is not a parameter of this experiment (its: {known})")


def parameters_of(experiment: Mapping[str, Any]) -> list[Parameter]:
    out = []
    for raw in (experiment.get("spec") or {}).get("parameters") or []:
        space = raw.get("feasibleSpace") or {}
        out.append(
            Parameter(
                name=str(raw.get("name", "")),
                type=str(raw.get("parameterType", "")),
                log=space.get("distribution") in ("logUniform", "logNormal"),
                choices=tuple(str(v) for v in space.get("list") or []),
            )
        )
    return out


def study_of(experiment: Mapping[str, Any], trials: Iterable[Mapping[str, Any]]) -> Study:
    """The experiment's trials, ordered like the page's table (creation time, then name)."""
    parameters = parameters_of(experiment)
    objective = objective_spec(experiment)
    rank = Ranker(objective)
    by_name = {p.name: p for p in parameters}
    keyed = []
    for trial in trials:
        meta = trial.get("metadata") or {}
        status = trial.get("status") or {}
        params: dict[str, float | str] = {}
        for assignment in (trial.get("spec") or {}).get("parameterAssignments") or []:
            parameter = by_name.get(str(assignment.get("name", "")))
            value = parameter.value(assignment.get("value")) if parameter else None
            if parameter is not None and value is not None:
                params[parameter.name] = value
        point = Point(
            name=str(meta.get("name", "")),
            state=conditions.trial_state(status.get("conditions")).value,
            params=params,
            value=rank(status.get("observation")),
            status=status,
        )
        keyed.append(((str(meta.get("creationTimestamp", "")), point.name), point))
    keyed.sort(key=lambda pair: pair[0])
    return Study(parameters, objective, [point for _, point in keyed])


def evenly(items: Sequence[T], limit: int) -> list[T]:
    """At most `limit` items, evenly spaced (always the first and the last): deterministic, so
    a redraw shows the same sample, and spread over the whole run."""
    n = len(items)
    if n <= limit:
        return list(items)
    if limit <= 1:
        return list(items[-1:])
    return [items[round(i * (n - 1) / (limit - 1))] for i in range(limit)]


def finished_key(study: Study) -> tuple[str, ...]:
    """What the importance depends on: the finished trials (a trial finishing changes it)."""
    return tuple(sorted(p.name for p in study.points if p.state in FINISHED))


def sample(study: Study, limits: Limits) -> Obj:
    """Succeeded trials for the slice plots: trial index (1-based, the objective chart's),
    name, objective and every parameter's value, at most `limits.points` of them."""
    index = {p.name: i + 1 for i, p in enumerate(study.points)}
    done = study.succeeded()
    chosen = evenly(done, limits.points)
    return {
        "of": len(done),
        "trials": [p.name for p in chosen],
        "index": [index[p.name] for p in chosen],
        "values": [p.value for p in chosen],
        "params": {q.name: [p.params.get(q.name) for p in chosen] for q in study.parameters},
    }


def edf(values: Iterable[float], limit: int) -> Obj:
    """The empirical distribution function: at each distinct value v, the share of values <= v.
    Past `limit` distinct values, `limit` of them evenly spaced (each share still exact)."""
    ordered = sorted(values)
    n = len(ordered)
    steps = [(v, (i + 1) / n) for i, v in enumerate(ordered) if i + 1 == n or ordered[i + 1] != v]
    chosen = evenly(steps, limit)
    return {"of": n, "x": [v for v, _ in chosen], "y": [s for _, s in chosen]}


def intermediate(study: Study, limits: Limits) -> Obj:
    """The objective metric's reported values per trial (`status.metricHistory`): at most
    `limits.curves` trials (evenly spaced, early-stopped ones first), each thinned to
    `limits.curve_points` points (the last one kept)."""
    curves = []
    for point in study.points:
        history = (point.status.get("metricHistory") or {}).get("metrics") or []
        for metric in history:
            if metric.get("name") != study.metric:
                continue
            values = [observations.parse_number(str(v)) for v in metric.get("values") or []]
            steps = list(metric.get("steps") or range(len(values)))[: len(values)]
            pairs = [(s, v) for s, v in zip(steps, values, strict=False) if v is not None]
            if pairs:
                curves.append((point, pairs))
    stopped = [c for c in curves if c[0].state == EARLY_STOPPED]
    others = [c for c in curves if c[0].state != EARLY_STOPPED]
    chosen = evenly(stopped, limits.curves)
    chosen += evenly(others, limits.curves - len(chosen)) if len(chosen) < limits.curves else []
    drawn = []
    for point, pairs in chosen:
        kept = evenly(pairs, limits.curve_points)
        drawn.append(
            {
                "name": point.name,
                "state": point.state,
                "earlyStopped": point.state == EARLY_STOPPED,
                "steps": [s for s, _ in kept],
                "values": [v for _, v in kept],
            }
        )
    return {"of": len(curves), "earlyStopped": len(stopped), "trials": drawn}


def _bins(parameter: Parameter, values: list[float | str], limit: int) -> tuple[list[Any], Any]:
    """The axis of a contour: its cell centres, and a function from a value to its cell."""
    if not parameter.numeric:
        cats = sorted({str(v) for v in values})
        where = {c: i for i, c in enumerate(cats)}
        return list(cats), lambda v: where[str(v)]
    numbers = [float(v) for v in values]
    distinct = sorted(set(numbers))
    if len(distinct) <= limit:
        at = {v: i for i, v in enumerate(distinct)}
        return list(distinct), lambda v: at[float(v)]
    log = parameter.log and distinct[0] > 0
    scale = math.log if log else float
    low, high = scale(distinct[0]), scale(distinct[-1])
    width = (high - low) / limit
    edges = [low + width * (i + 0.5) for i in range(limit)]
    centres = [math.exp(e) if log else e for e in edges]
    return centres, lambda v: min(limit - 1, int((scale(float(v)) - low) / width))


def contour(study: Study, x: str, y: str, limits: Limits) -> Obj:
    """The best objective per cell of a grid over two parameters (every succeeded trial counts;
    the grid is at most `limits.bins` a side), and a sample of the trials as points."""
    if x == y:
        raise BadQuery(f"x and y: both are {x!r}; choose two different parameters")
    px, py = study.parameter(x, "x"), study.parameter(y, "y")
    done = [p for p in study.succeeded() if x in p.params and y in p.params]
    xs, cell_x = _bins(px, [p.params[x] for p in done], limits.bins)
    ys, cell_y = _bins(py, [p.params[y] for p in done], limits.bins)
    z: list[list[float | None]] = [[None] * len(xs) for _ in ys]
    for p in done:
        assert p.value is not None
        row, col = cell_y(p.params[y]), cell_x(p.params[x])
        old = z[row][col]
        if old is None or (p.value > old if study.maximize else p.value < old):
            z[row][col] = p.value
    shown = evenly(done, limits.points)
    return {
        "x": px.as_json(),
        "y": py.as_json(),
        "of": len(done),
        "grid": {"x": xs, "y": ys, "z": z},
        "points": {
            "x": [p.params[x] for p in shown],
            "y": [p.params[y] for p in shown],
            "values": [p.value for p in shown],
            "trials": [p.name for p in shown],
        },
    }


def objectives_of(experiment: Mapping[str, Any]) -> list[ObjectiveSpec]:
    """`spec.objective.objectives` (a kubetune extension: several objectives), each as an
    objective of its own that shares the experiment's metric strategies; [] when absent."""
    objective = (experiment.get("spec") or {}).get("objective") or {}
    listed = objective.get("objectives")
    if not isinstance(listed, list):
        return []
    out = []
    for entry in listed:
        if not isinstance(entry, Mapping) or not entry.get("metricName"):
            continue
        raw = {
            "type": entry.get("type"),
            "objectiveMetricName": entry["metricName"],
            "metricStrategies": objective.get("metricStrategies"),
        }
        try:
            out.append(ObjectiveSpec.model_validate(raw))
        except ValidationError:
            continue  # admission refuses it; the page draws what it can
    return out


def pareto(experiment: Mapping[str, Any], study: Study, limits: Limits) -> Obj:
    """Every objective's value of a sample of the succeeded trials, and the Pareto front as
    the experiment's status holds it (`status.paretoFront`, `status.paretoFrontSize`)."""
    objectives = objectives_of(experiment)
    if len(objectives) < 2:
        return {"objectives": []}
    ranks = [Ranker(o) for o in objectives]
    status = experiment.get("status") or {}
    raw_front = status.get("paretoFront")
    front_entries = (
        [e for e in raw_front if isinstance(e, Mapping)] if isinstance(raw_front, list) else []
    )
    front = []
    for entry in front_entries[: limits.front]:
        values = [rank(entry.get("observation")) for rank in ranks]
        if all(v is not None for v in values):
            front.append({"trial": str(entry.get("trialName", "")), "values": values})
    in_front = {f["trial"] for f in front}
    rest = [p for p in study.points if p.state == SUCCEEDED and p.name not in in_front]
    trials = []
    for point in evenly(rest, limits.points):
        values = [rank(point.status.get("observation")) for rank in ranks]
        if all(v is not None for v in values):
            trials.append({"trial": point.name, "values": values})
    size = status.get("paretoFrontSize")
    return {
        "objectives": [
            {"metric": o.objective_metric_name, "type": o.type.value if o.type else ""}
            for o in objectives
        ],
        "front": front,
        "frontSize": size if isinstance(size, int) else len(front_entries),
        "trials": trials,
        "of": len(rest),
    }


def insight(experiment: Mapping[str, Any], study: Study, limits: Limits) -> Obj:
    """The charts' data of one experiment, except the importance and the contour (each its own
    request: the one costs a model, the other names two parameters)."""
    return {
        "objective": {"metric": study.metric, "maximize": study.maximize},
        "parameters": [p.as_json() for p in study.parameters],
        "trials": len(study.points),
        "sample": sample(study, limits),
        "edf": edf((p.value for p in study.succeeded() if p.value is not None), limits.edf_points),
        "intermediate": intermediate(study, limits),
        "pareto": pareto(experiment, study, limits),
        "limits": {
            "points": limits.points,
            "curves": limits.curves,
            "edfPoints": limits.edf_points,
            "bins": limits.bins,
        },
    }
