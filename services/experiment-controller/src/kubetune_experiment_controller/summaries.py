"""Trials reduced to what the experiment-controller needs: state, assignments, observation.

At 10,000 trials a cache of whole Trial objects (each with its rendered runSpec) costs hundreds
of MiB, so the Trial informer keeps only `cached(trial)`: the metadata the runtime needs and a
compact `TrialSummary`. `count` buckets the summaries into upstream's states and `optimal`
picks the best finished (Succeeded or EarlyStopped) trial by the objective's type and metric
strategy; that optimum alone decides the goal. Trials still running when the
Experiment completes are left to finish, as upstream does, and are still counted.
A Trial's observation is read within the bounds every writer keeps (`_metrics`): a Trial
written around them (by hand, or before the bounds) cannot blow up the Experiment status,
which copies the optimum's observation, or this cache.
Neighbours: `planning` turns counts into conditions and requests.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kubetune import naming, observations
from kubetune.api.common import (
    Metric,
    MetricStrategyType,
    ObjectiveSpec,
    Observation,
    ParameterAssignment,
)
from kubetune.conditions import TrialState, trial_state
from kubetune.kube import Obj

SUMMARY_KEY = "kubetune.summary"

Metrics = tuple[tuple[str, str | None, str | None, str | None], ...]
"""An observation as (name, min, max, latest) tuples: far smaller than the dicts."""


@dataclass(frozen=True, slots=True)
class TrialSummary:
    name: str
    state: TrialState
    created: str = ""
    assignments: tuple[tuple[str, str], ...] = ()
    metrics: Metrics | None = None


def _intern(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) else value


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _bounded(value: Any) -> str | None:
    """A stored value, `unavailable` when longer than any writer may write (a number over
    `MAX_VALUE_CHARS` was never one a float holds; text over `MAX_TEXT_CHARS` is data)."""
    text = _text(value)
    if text is not None and observations.metric_error("metric", text) is not None:
        return observations.UNAVAILABLE
    return text


def _metrics(status: Any) -> Metrics | None:
    """The observation as tuples: the first `MAX_METRICS` metrics, without those whose name is
    longer than `MAX_NAME_CHARS`, values no writer may write read as unavailable."""
    observation = status.get("observation") if isinstance(status, dict) else None
    observed = observation.get("metrics") if isinstance(observation, dict) else None
    if not observed or not isinstance(observed, list):
        return None
    return (
        tuple(
            (
                _intern(name),
                _bounded(m.get("min")),
                _bounded(m.get("max")),
                _bounded(m.get("latest")),
            )
            for m in observed[: observations.MAX_METRICS]
            if isinstance(m, dict)
            and 0 < len(name := str(m.get("name"))) <= observations.MAX_NAME_CHARS
        )
        or None
    )


def summarise(trial: Obj) -> TrialSummary:
    """A Trial as a summary."""
    meta = trial.get("metadata") or {}
    status = trial.get("status") or {}
    metrics = _metrics(status)
    return TrialSummary(
        name=str(meta.get("name") or ""),
        state=trial_state(status.get("conditions")),
        created=str(meta.get("creationTimestamp") or ""),
        assignments=tuple(
            (_intern(str(a.get("name"))), str(a.get("value")))
            for a in (trial.get("spec") or {}).get("parameterAssignments") or ()
        ),
        metrics=metrics,
    )


def cached(trial: Obj) -> Obj:
    """The informer transform: the metadata the runtime and the filter need, and the summary.

    A few hundred bytes per Trial instead of the whole object with its rendered runSpec.
    Strings every Trial of an experiment repeats (namespace, label, owner) are interned.
    """
    meta = trial.get("metadata") or {}
    labels = meta.get("labels") or {}
    slim_labels = {}
    if naming.LABEL_EXPERIMENT in labels:
        slim_labels[naming.LABEL_EXPERIMENT] = _intern(labels[naming.LABEL_EXPERIMENT])
    slim_meta: dict[str, Any] = {
        "name": meta.get("name"),
        "namespace": _intern(meta.get("namespace")),
        "resourceVersion": meta.get("resourceVersion"),
        "labels": slim_labels,
        "ownerReferences": [
            {
                "apiVersion": _intern(r.get("apiVersion")),
                "kind": _intern(r.get("kind")),
                "name": _intern(r.get("name")),
            }
            for r in meta.get("ownerReferences") or []
            if r.get("controller")
        ],
    }
    return {"metadata": slim_meta, SUMMARY_KEY: summarise(trial)}


def _planned(summary: TrialSummary) -> TrialSummary:
    """The part of a summary a plan reads: a Trial's metrics only once its state makes them
    final (`RANKED`); before that they are the collector's interim reports."""
    return summary if summary.state in RANKED else replace(summary, metrics=None)


def plan_input_changed(old: Obj, new: Obj) -> bool:
    """The Trial watch's predicate: whether an update of a cached Trial changes what a plan
    of its Experiment reads (state, assignments, final observation, the labels and owners
    that find its Experiment). An interim report or a metric-history append on a
    running Trial changes none of them, so it costs its Experiment no pass."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return (
        old_meta.get("labels") != new_meta.get("labels")
        or old_meta.get("ownerReferences") != new_meta.get("ownerReferences")
        or _planned(summary_of(old)) != _planned(summary_of(new))
    )


def summary_of(trial: Obj) -> TrialSummary:
    """The summary a `cached` object carries, else computed now."""
    found = trial.get(SUMMARY_KEY)
    return found if isinstance(found, TrialSummary) else summarise(trial)


@dataclass(frozen=True)
class Counts:
    """Trials per state, and the names per state, newest last."""

    total: int
    by_state: dict[TrialState, int]
    names: dict[TrialState, list[str]]

    def __getitem__(self, state: TrialState) -> int:
        return self.by_state.get(state, 0)

    @property
    def active(self) -> int:
        return self[TrialState.PENDING] + self[TrialState.RUNNING]

    @property
    def finished(self) -> int:
        """Every completed trial, MetricsUnavailable included (upstream's max-trials count)."""
        return self.total - self.active


def in_creation_order(trials: Iterable[TrialSummary]) -> list[TrialSummary]:
    """Oldest first (creation time, then name): the order `count` and `optimal` expect."""
    return sorted(trials, key=lambda t: (t.created, t.name))


def count(trials: Sequence[TrialSummary]) -> Counts:
    """Bucket the trials (given `in_creation_order`); names keep that order, oldest first."""
    by_state: dict[TrialState, int] = {}
    names: dict[TrialState, list[str]] = {}
    for trial in trials:
        by_state[trial.state] = by_state.get(trial.state, 0) + 1
        names.setdefault(trial.state, []).append(trial.name)
    return Counts(total=len(trials), by_state=by_state, names=names)


@dataclass(frozen=True)
class Optimum:
    name: str
    value: float
    assignments: list[ParameterAssignment]
    observation: Observation


_MISSING = (None, "", observations.UNAVAILABLE)
STRATEGY_FIELDS = {"min": 1, "max": 2, "latest": 3}


def objective_field_value(name: str, field: int, metrics: Metrics) -> float | None:
    """The objective's value: the strategy's field, else `latest` (as `metric_value` does).

    On tuples, not models: this runs for every trial on every reconcile (10,000 of them).
    """
    for metric in metrics:
        if metric[0] == name:
            chosen = metric[field]
            if chosen in _MISSING:
                chosen = metric[3]
            return None if chosen in _MISSING else observations.parse_number(str(chosen))
    return None


RANKED = frozenset({TrialState.SUCCEEDED, TrialState.EARLY_STOPPED})
"""The states whose observation is final: upstream writes a Trial's observation only once its
job succeeded or it was early stopped, so only these ever become the optimum or reach the goal.
kubetune's collector also reports intermediate values on Running (and Failed) Trials, for the
user to watch; they are never ranked."""


def optimal(objective: ObjectiveSpec, trials: Sequence[TrialSummary]) -> Optimum | None:
    """The best finished trial (`RANKED`) by the objective metric's strategy; ties keep the
    first (trials given `in_creation_order`, so the earliest created).

    Trials whose objective value is unavailable or not a number are skipped (upstream made a
    non-numeric value the best trial; kubetune cannot rank text, so it ignores it).
    """
    name = objective.objective_metric_name
    strategy = observations.strategies(objective).get(name, MetricStrategyType.LATEST)
    field = STRATEGY_FIELDS[str(strategy)]
    best: TrialSummary | None = None
    best_value: float | None = None
    for trial in trials:
        if not trial.metrics or trial.state not in RANKED:
            continue
        value = objective_field_value(name, field, trial.metrics)
        if value is not None and observations.better(objective, value, best_value):
            best, best_value = trial, value
    if best is None or best_value is None or best.metrics is None:
        return None
    return Optimum(
        name=best.name,
        value=best_value,
        assignments=[ParameterAssignment(name=n, value=v) for n, v in best.assignments],
        observation=Observation(
            metrics=[Metric(name=n, min=lo, max=hi, latest=la) for n, lo, hi, la in best.metrics]
        ),
    )
