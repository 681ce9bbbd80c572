"""What the pages show, computed from the raw objects of the caches (plain JSON dicts).

Pure functions, so the shapes the browser gets are unit-tested without a server. Objects stay
dicts (no model validation per trial): an experiment page with thousands of trials is built on
every change, and must stay fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubetune import conditions, observations
from kubetune.api.common import ObjectiveSpec, Observation

Obj = dict[str, Any]

COUNTS = (
    ("trials", "trials"),
    ("succeeded", "trialsSucceeded"),
    ("running", "trialsRunning"),
    ("pending", "trialsPending"),
    ("failed", "trialsFailed"),
    ("killed", "trialsKilled"),
    ("earlyStopped", "trialsEarlyStopped"),
    ("metricsUnavailable", "trialMetricsUnavailable"),
)


def experiment_state(experiment: Mapping[str, Any]) -> str:
    """The last true condition's type (Created, Running, Restarting, Succeeded, Failed)."""
    conds = (experiment.get("status") or {}).get("conditions") or []
    true = [c.get("type", "") for c in conds if c.get("status") == "True"]
    return str(true[-1]) if true else "Pending"


OBJECTIVE_FIELDS = frozenset(
    field.alias or name for name, field in ObjectiveSpec.model_fields.items()
)


def objective_spec(obj: Mapping[str, Any]) -> ObjectiveSpec | None:
    """`spec.objective` of an Experiment or a Trial (each Trial carries a copy). Fields this
    model does not know (a newer API's extensions, e.g. `objectives`) are left out: the pages
    still draw an experiment that uses them."""
    raw = (obj.get("spec") or {}).get("objective")
    if not raw:
        return None
    return ObjectiveSpec.model_validate({k: v for k, v in raw.items() if k in OBJECTIVE_FIELDS})


def objective_of(objective: ObjectiveSpec | None, observation: Any) -> float | None:
    """The objective value by its metric strategy (the rule the controllers rank trials by)."""
    if objective is None or not observation:
        return None
    return observations.objective_value(objective, Observation.model_validate(observation))


class Ranker:
    """`objective_of` for many observations of one experiment, on the raw dicts: the same rule
    (`observations.metric_value` and `parse_number`) without validating a model per trial."""

    def __init__(self, objective: ObjectiveSpec | None) -> None:
        self.objective = objective
        self.name = objective.objective_metric_name if objective else None
        strategy = observations.strategies(objective).get(self.name or "") if objective else None
        self.key = str(strategy) if strategy is not None else "latest"

    def __call__(self, observation: Mapping[str, Any] | None) -> float | None:
        if self.name is None or not observation:
            return None
        for metric in observation.get("metrics") or []:
            if metric.get("name") == self.name:
                chosen = metric.get(self.key)
                if chosen in (None, "", observations.UNAVAILABLE):
                    chosen = metric.get("latest")
                return observations.parse_number(str(chosen)) if chosen else None
        return None


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def warm_start(status: Mapping[str, Any]) -> Obj | None:
    """`status.warmStart` (the experiment-controller's mirror of what the algorithm imported):
    known results fed to the algorithm, shown apart from the trial counts because they are
    not Trials that ran. None when the Experiment has no warm start."""
    raw = status.get("warmStart")
    if not isinstance(raw, Mapping):
        return None
    return {
        "imported": _count(raw.get("imported")),
        "skipped": _count(raw.get("skipped")),
        "sources": [
            {
                "kind": str(source.get("kind") or ""),
                "name": str(source.get("name") or ""),
                "imported": _count(source.get("imported")),
                "skipped": _count(source.get("skipped")),
                "message": str(source.get("message") or ""),
            }
            for source in raw.get("sources") or []
            if isinstance(source, Mapping)
        ],
    }


def experiment_summary(experiment: Mapping[str, Any]) -> Obj:
    """One row of the experiments list."""
    meta = experiment.get("metadata") or {}
    spec = experiment.get("spec") or {}
    status = experiment.get("status") or {}
    objective = objective_spec(experiment)
    optimal = status.get("currentOptimalTrial") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "created": meta.get("creationTimestamp", ""),
        "state": experiment_state(experiment),
        "counts": {key: int(status.get(field) or 0) for key, field in COUNTS},
        "warmStart": warm_start(status),
        "maxTrialCount": spec.get("maxTrialCount"),
        "parallelTrialCount": spec.get("parallelTrialCount"),
        "algorithm": (spec.get("algorithm") or {}).get("algorithmName", ""),
        "objectiveMetric": objective.objective_metric_name if objective else "",
        "objectiveType": (objective.type.value if objective and objective.type else ""),
        "bestTrial": optimal.get("bestTrialName") or "",
        "bestObjective": objective_of(objective, optimal.get("observation")),
    }


def _duration(status: Mapping[str, Any]) -> tuple[str, str]:
    return str(status.get("startTime") or ""), str(status.get("completionTime") or "")


def trial_row(trial: Mapping[str, Any], objective: ObjectiveSpec | Ranker | None) -> Obj:
    """One row of an experiment's trials table."""
    rank = objective if isinstance(objective, Ranker) else Ranker(objective)
    meta = trial.get("metadata") or {}
    spec = trial.get("spec") or {}
    status = trial.get("status") or {}
    observation = status.get("observation") or {}
    start, end = _duration(status)
    return {
        "name": meta.get("name", ""),
        "created": meta.get("creationTimestamp", ""),
        "state": conditions.trial_state(status.get("conditions")).value,
        "parameters": {
            p.get("name", ""): p.get("value", "") for p in spec.get("parameterAssignments") or []
        },
        "metrics": {
            m.get("name", ""): m.get("latest", "") for m in observation.get("metrics") or []
        },
        "objective": rank(observation),
        "start": start,
        "end": end,
    }


def best_so_far(
    objective: ObjectiveSpec | None, values: Iterable[float | None]
) -> list[float | None]:
    """The best objective after each trial, in trial order (None before the first value)."""
    best: float | None = None
    out: list[float | None] = []
    for value in values:
        if (
            value is not None
            and objective is not None
            and observations.better(objective, value, best)
        ):
            best = value
        out.append(best)
    return out


def experiment_page(experiment: Mapping[str, Any], trials: Iterable[Mapping[str, Any]]) -> Obj:
    """Everything the experiment page draws: summary, parameters, trials (in creation order),
    the best-so-far curve and the best trial's assignments."""
    objective = objective_spec(experiment)
    rank = Ranker(objective)
    rows = sorted((trial_row(t, rank) for t in trials), key=lambda r: (r["created"], r["name"]))
    status = experiment.get("status") or {}
    optimal = status.get("currentOptimalTrial") or {}
    spec = experiment.get("spec") or {}
    return {
        "experiment": experiment_summary(experiment),
        "parameters": [p.get("name", "") for p in spec.get("parameters") or []],
        "parameterTypes": {
            p.get("name", ""): p.get("parameterType", "") for p in spec.get("parameters") or []
        },
        "metrics": _metric_names(objective, rows),
        "trials": rows,
        "bestSoFar": best_so_far(objective, (r["objective"] for r in rows)),
        "best": _best(objective, optimal, rows),
    }


def _best(objective: ObjectiveSpec | None, optimal: Mapping[str, Any], rows: list[Obj]) -> Obj:
    """The Experiment's currentOptimalTrial; until the controller has set one, the best of the
    trials shown (the same ranking rule)."""
    if optimal.get("bestTrialName"):
        return {
            "trial": optimal["bestTrialName"],
            "parameters": {
                p.get("name", ""): p.get("value", "")
                for p in optimal.get("parameterAssignments") or []
            },
            "objective": objective_of(objective, optimal.get("observation")),
        }
    best: Obj | None = None
    for row in rows:
        value = row["objective"]
        if value is None or objective is None:
            continue
        if best is None or observations.better(objective, value, best["objective"]):
            best = row
    if best is None:
        return {"trial": "", "parameters": {}, "objective": None}
    return {"trial": best["name"], "parameters": best["parameters"], "objective": best["objective"]}


def _metric_names(objective: ObjectiveSpec | None, rows: Iterable[Obj]) -> list[str]:
    names: list[str] = []
    if objective is not None:
        names += [objective.objective_metric_name or ""]
        names += list(objective.additional_metric_names or [])
    for row in rows:
        names += [n for n in row["metrics"] if n not in names]
    return [n for n in names if n]


def metric_history(status: Mapping[str, Any]) -> Obj:
    """Per metric: the reported values as curves (`status.metricHistory`), or, for trials
    without a history, min/max/latest of the observation (`summary`: no curve to draw)."""
    history = (status.get("metricHistory") or {}).get("metrics") or []
    curves = {}
    for metric in history:
        values = [observations.parse_number(str(v)) for v in metric.get("values") or []]
        curves[metric.get("name", "")] = {
            "steps": list(metric.get("steps") or range(len(values))),
            "values": values,
            "times": list(metric.get("times") or []),
            "reports": metric.get("reports", len(values)),
        }
    summary = {
        m.get("name", ""): {k: m.get(k, "") for k in ("min", "max", "latest")}
        for m in (status.get("observation") or {}).get("metrics") or []
    }
    return {"curves": curves, "summary": summary}


def trial_page(trial: Mapping[str, Any], experiment: str) -> Obj:
    """The trial page: its row (ranked by the objective the Trial carries, a copy of its
    experiment's), conditions, metric history, and its experiment's name."""
    objective = objective_spec(trial)
    status = trial.get("status") or {}
    spec = trial.get("spec") or {}
    return {
        "trial": trial_row(trial, objective),
        "namespace": (trial.get("metadata") or {}).get("namespace", ""),
        "experiment": experiment,
        "primaryContainer": spec.get("primaryContainerName") or "",
        "conditions": [
            {k: c.get(k, "") for k in ("type", "status", "reason", "message", "lastTransitionTime")}
            for c in status.get("conditions") or []
        ],
        "history": metric_history(status),
    }
