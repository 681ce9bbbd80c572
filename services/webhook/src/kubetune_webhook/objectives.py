"""Admission rules of multi-objective Experiments (`spec.objective.objectives`, kubetune's
extension; `kubetune.multiobjective` says what it means).

Messages as the rest of validation: `<field path>: <what is wrong>; <what to do>`. A manifest
without `objectives` gets no problem from here, so Katib manifests are judged exactly as before.

Neighbours: `validating` (calls `check_shape` before the model loads, `validate` after),
`defaulting` (fills objectiveMetricName/type in from the first objective).
"""

from __future__ import annotations

from typing import Any

from kubetune import multiobjective, observations
from kubetune.api.experiment import ExperimentSpec
from kubetune.config import ConfigError, KatibConfig

FIELD = "spec.objective.objectives"
TYPES = ("minimize", "maximize")


def check_shape(manifest: dict[str, Any]) -> list[str]:
    """Each objective's type, named before the model gives its generic enum message."""
    spec = manifest.get("spec")
    objective = spec.get("objective") if isinstance(spec, dict) else None
    entries = objective.get("objectives") if isinstance(objective, dict) else None
    problems = []
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if isinstance(entry, dict) and kind not in TYPES:
            problems.append(
                f"{FIELD}[{index}].type: invalid type {kind!r}; use one of {', '.join(TYPES)}"
            )
    return problems


def _entries(spec: ExperimentSpec) -> list[str]:
    """The objectives' own problems: count, names, types, the first objective."""
    objective = spec.objective
    assert objective is not None and objective.objectives is not None
    entries = objective.objectives
    if len(entries) < 2:
        return [
            f"{FIELD}: {len(entries)} objective(s); list two or more, or remove objectives "
            "and set objectiveMetricName/type for a single objective"
        ]
    problems = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        path = f"{FIELD}[{index}]"
        if not entry.metric_name:
            problems.append(f"{path}.metricName: required; name the metric of this objective")
        elif len(entry.metric_name) > observations.MAX_NAME_CHARS:
            problems.append(
                f"{path}.metricName: {len(entry.metric_name)} characters, more than "
                f"{observations.MAX_NAME_CHARS}: use a shorter metric name"
            )
        elif entry.metric_name in seen:
            problems.append(
                f"{path}.metricName: {entry.metric_name!r} is also {FIELD}"
                f"[{seen[entry.metric_name]}]; give each objective its own metric"
            )
        else:
            seen[entry.metric_name] = index
        if entry.type.value not in TYPES:
            problems.append(f"{path}.type: must be minimize or maximize")
    first = entries[0]
    if objective.objective_metric_name and objective.objective_metric_name != first.metric_name:
        problems.append(
            f"spec.objective.objectiveMetricName: {objective.objective_metric_name!r} differs "
            f"from {FIELD}[0].metricName {first.metric_name!r}; the first objective is the "
            "Experiment's objective: make them equal, or leave objectiveMetricName out"
        )
    if objective.type and first.type.value in TYPES and objective.type != first.type:
        problems.append(
            f"spec.objective.type: {objective.type.value!r} differs from {FIELD}[0].type "
            f"{first.type.value!r}; the first objective is the Experiment's objective: make "
            "them equal, or leave type out"
        )
    additional = objective.additional_metric_names or []
    for index, name in enumerate(additional):
        if name in seen and name != first.metric_name:
            problems.append(
                f"spec.objective.additionalMetricNames[{index}]: {name!r} is already an "
                f"objective ({FIELD}[{seen[name]}]), so it is collected; remove it from "
                "additionalMetricNames"
            )
    collected = set(seen) | set(additional) | {objective.objective_metric_name}
    collected.discard("")
    if len(collected) > observations.MAX_METRICS:
        problems.append(
            f"{FIELD}: with additionalMetricNames, {len(collected)} metrics to collect, more "
            f"than {observations.MAX_METRICS} (an observation holds at most "
            f"{observations.MAX_METRICS}); collect fewer metrics"
        )
    return problems


def _algorithm(spec: ExperimentSpec, config: KatibConfig) -> list[str]:
    """Only algorithms with a multi-objective mode, run by kubetune (not a Katib image)."""
    name = spec.algorithm.algorithm_name if spec.algorithm else ""
    if not name:
        return []  # validating names the missing algorithm
    refused = multiobjective.refusal(name)
    if refused:
        return [f"spec.algorithm.algorithmName: {refused}"]
    try:
        bridged = config.suggestion(name).katib_grpc()
    except ConfigError:
        return []  # validating names the missing entry
    if bridged:
        return [
            f"spec.algorithm.algorithmName: algorithm {name} runs a Katib image "
            "(katib-config), whose API takes a single objective; with "
            f"{FIELD} use kubetune's own algorithm image, or remove objectives"
        ]
    return []


def validate(spec: ExperimentSpec, config: KatibConfig) -> list[str]:
    """Every problem of a multi-objective Experiment ([] for a single objective)."""
    objective = spec.objective
    if objective is None or objective.objectives is None:
        return []
    problems = _entries(spec)
    if objective.goal is not None:
        problems.append(
            f"spec.objective.goal: not defined with several objectives ({FIELD}): one "
            "threshold cannot say when a trade-off is good enough; remove goal (the "
            "Experiment ends at maxTrialCount)"
        )
    if spec.early_stopping is not None:
        problems.append(
            f"spec.earlyStopping: not available with several objectives ({FIELD}): the "
            "rules compare one metric; remove earlyStopping"
        )
    return problems + _algorithm(spec, config)
