"""Known results for warm start: the `results.json` format, where they come from, which fit.

A known result is one point of an earlier search (its parameter assignments) with its metrics.
`spec.warmStart` names earlier Experiments (their Succeeded Trials) and ConfigMaps holding
`results.json` (written by `kubetune export`, or by hand); the algorithm adds the results that
fit the current search space to its study before its first assignment. They are never Trials:
they count toward no `maxTrialCount` and appear only as `status.warmStart`.

The document, version 1 (docs/user-guide.md shows an example):

    {"version": 1,
     "objective": {"type": "maximize", "objectiveMetricName": "acc", ...},   # informative
     "parameters": [ ...spec.parameters of the source... ],                   # informative
     "results": [{"trialName": "t1",                                          # optional
                  "parameterAssignments": [{"name": "lr", "value": "0.01"}],
                  "metrics": [{"name": "acc", "value": 0.93}]}]}

A metric's `value` is a number (or numeric text): the value the source's metric strategy
selected (max for a maximized objective by default). Only `version` and `results` are read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kubetune import conditions, errors, kube, naming, observations
from kubetune.api.enums import MetricStrategyType
from kubetune.api.experiment import Experiment, ExperimentSpec, ParameterSpec, ParameterType
from kubetune.api.trial import Trial
from kubetune.conditions import TrialState
from kubetune.kube import EXPERIMENTS, TRIALS, Kube

KEY = "results.json"
"""The ConfigMap key holding the document."""
VERSION = 1
MOUNT_ROOT = "/opt/kubetune/warm-start"
"""Where the algorithm pod finds `<ConfigMap name>/results.json` (the kubelet mounts them: the
algorithm's ServiceAccount gets no right on ConfigMaps)."""
ALGORITHMS = ("tpe", "multivariate-tpe", "bayesianoptimization")
"""Algorithms that learn from results they did not draw: Optuna's TPE reads every complete
trial of its study, scikit-optimize is told every point. The others draw without history
(random, sobol, grid), keep state only for points they drew themselves (cmaes: its generations;
hyperband, pbt: their brackets and populations), or search an architecture (darts, enas)."""
MAX_SOURCES = 16
MAX_RESULTS = 10_000
"""Known results read in all; beyond it a result is skipped (TPE's cost grows with the study)."""


class FormatError(ValueError):
    """A `results.json` that cannot be read; the message names the field and the fix."""


@dataclass(frozen=True)
class KnownResult:
    """One point: assignments as Katib text, metrics as numbers (None: not a number)."""

    assignments: dict[str, str]
    metrics: dict[str, float | None]
    origin: str
    """Where it came from, for messages: a Trial name or `<ConfigMap>[index]`."""


# -- writing ---------------------------------------------------------------------------------


def from_trials(spec: ExperimentSpec, trials: Iterable[Trial]) -> list[KnownResult]:
    """The Succeeded Trials as known results, each metric by the source's metric strategy."""
    objective = spec.objective
    strategies = observations.strategies(objective) if objective else {}
    out = []
    for trial in sorted(trials, key=lambda t: t.metadata.name or ""):
        status = trial.status
        if status is None or conditions.trial_state(status.conditions) is not TrialState.SUCCEEDED:
            continue
        metrics: dict[str, float | None] = {}
        for metric in (status.observation.metrics if status.observation else None) or []:
            strategy = strategies.get(metric.name, MetricStrategyType.LATEST)
            metrics[metric.name] = observations.parse_number(
                observations.metric_value(metric, strategy)
            )
        out.append(
            KnownResult(
                {p.name: p.value for p in trial.spec.parameter_assignments or []},
                metrics,
                trial.metadata.name or "",
            )
        )
    return out


def read_experiment(
    client: Kube, namespace: str, name: str
) -> tuple[ExperimentSpec, list[KnownResult]] | None:
    """An Experiment's spec and its Succeeded Trials as known results; None when it is gone."""
    raw = client.get_or_none(EXPERIMENTS, name, namespace)
    if raw is None:
        return None
    spec = Experiment.model_validate(raw).spec
    trials = client.list_all(
        TRIALS, namespace, label_selector=f"{naming.LABEL_EXPERIMENT}={naming.label_value(name)}"
    )
    return spec, from_trials(spec, (Trial.model_validate(t) for t in trials))


def document(spec: ExperimentSpec, results: Sequence[KnownResult]) -> dict[str, Any]:
    """The version 1 document of `results` found by an Experiment of `spec`."""
    return {
        "version": VERSION,
        "objective": spec.objective.to_wire() if spec.objective else {},
        "parameters": [p.to_wire() for p in spec.parameters or []],
        "results": [
            {
                "trialName": r.origin,
                "parameterAssignments": [{"name": k, "value": v} for k, v in r.assignments.items()],
                "metrics": [{"name": k, "value": v} for k, v in r.metrics.items() if v is not None],
            }
            for r in results
        ],
    }


# -- reading ---------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return observations.parse_number(value)
    return None


def _pairs(entry: Any, field: str, where: str) -> list[tuple[str, Any]]:
    items = entry.get(field) if isinstance(entry, dict) else None
    if not isinstance(items, list):
        raise FormatError(f"{where}.{field}: must be a list of {{name, value}}")
    out = []
    for j, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise FormatError(f"{where}.{field}[{j}]: must be an object with a name and a value")
        out.append((item["name"], item.get("value")))
    return out


def parse(text: str, source: str) -> list[KnownResult]:
    """The results of a version 1 document; `source` names it in errors and origins."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise FormatError(
            f"{source}: {KEY} is not JSON ({e}); write it with `kubetune export`"
        ) from e
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        found = doc.get("version") if isinstance(doc, dict) else None
        raise FormatError(f"{source}: version must be {VERSION}, found {found!r}")
    entries = doc.get("results")
    if not isinstance(entries, list):
        raise FormatError(f"{source}: results must be a list")
    out = []
    for i, entry in enumerate(entries):
        where = f"{source}: results[{i}]"
        assignments = _pairs(entry, "parameterAssignments", where)
        metrics = _pairs(entry, "metrics", where)
        origin = entry.get("trialName") if isinstance(entry.get("trialName"), str) else ""
        out.append(
            KnownResult(
                {
                    name: value if isinstance(value, str) else json.dumps(value)
                    for name, value in assignments
                },
                {name: _number(value) for name, value in metrics},
                origin or f"{source}[{i}]",
            )
        )
    return out


# -- fitting the current search space -------------------------------------------------------


def _float(text: str | None) -> float | None:
    return observations.parse_number(text) if text not in (None, "") else None


def misfit(parameters: Sequence[ParameterSpec], assignments: dict[str, str]) -> str | None:
    """Why the assignments lie outside the search space, or None when they fit (the step
    grid is the algorithm's check: it knows how each distribution is stored)."""
    names = {p.name for p in parameters}
    extra = sorted(set(assignments) - names)
    if extra:
        return f"parameter {extra[0]} is not in the search space"
    for parameter in parameters:
        value = assignments.get(parameter.name)
        if value is None:
            return f"no value for parameter {parameter.name}"
        space = parameter.feasible_space
        if parameter.parameter_type in (ParameterType.INT, ParameterType.DOUBLE):
            number = _float(value)
            low, high = _float(space.min), _float(space.max)
            if number is None:
                return f"{parameter.name}={value} is not a number"
            if parameter.parameter_type == ParameterType.INT and number != int(number):
                return f"{parameter.name}={value} is not an integer"
            if (low is not None and number < low) or (high is not None and number > high):
                return f"{parameter.name}={value} is outside [{space.min}, {space.max}]"
        elif value not in (space.values or []):
            return f"{parameter.name}={value} is not in its list"
    return None


# -- admission -------------------------------------------------------------------------------


def validate_spec(name: str, spec: ExperimentSpec) -> list[str]:
    """Problems of `spec.warmStart` of Experiment `name` ([] when absent or fine)."""
    warm = spec.warm_start
    if warm is None:
        return []
    experiments, config_maps = warm.experiments or [], warm.config_maps or []
    problems = []
    if not experiments and not config_maps:
        problems.append(
            "spec.warmStart: names no source; list experiments and/or configMaps, "
            "or remove spec.warmStart"
        )
    if len(experiments) + len(config_maps) > MAX_SOURCES:
        problems.append(
            f"spec.warmStart: {len(experiments) + len(config_maps)} sources, more than "
            f"{MAX_SOURCES}; merge results into fewer ConfigMaps with `kubetune export`"
        )
    for field, names in (("experiments", experiments), ("configMaps", config_maps)):
        seen: set[str] = set()
        for i, source in enumerate(names):
            try:
                kube.object_name(source)
            except errors.InvalidName as e:
                problems.append(f"spec.warmStart.{field}[{i}]: {e}")
            if source in seen:
                problems.append(f"spec.warmStart.{field}[{i}]: {source} is listed twice")
            seen.add(source)
    if name and name in experiments:
        problems.append(
            f"spec.warmStart.experiments: names this Experiment ({name}); "
            "list earlier Experiments only"
        )
    algorithm = spec.algorithm.algorithm_name if spec.algorithm else ""
    if algorithm not in ALGORITHMS:
        problems.append(
            f"spec.warmStart: algorithm {algorithm or '(none)'} cannot use known results; "
            f"use one of {', '.join(ALGORITHMS)}, or remove spec.warmStart"
        )
    return problems
