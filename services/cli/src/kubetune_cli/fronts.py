"""`kubetune best` of a multi-objective Experiment: its Pareto front (`status.paretoFront`,
written by the experiment-controller), as a table or JSON, instead of a single best trial.

Neighbours: `plotting.plot_front` draws the front from the trials; `reading` reads them.
"""

from __future__ import annotations

from typing import Any

from kubetune import multiobjective, observations
from kubetune.api.experiment import Experiment
from kubetune_cli import tables


def as_json(experiment: Experiment) -> dict[str, Any]:
    """The front as the status holds it, its full size, and Katib's optimal trial."""
    status = experiment.status
    optimal = status.current_optimal_trial if status else None
    return {
        "paretoFront": [e.to_wire() for e in (status.pareto_front if status else None) or []],
        "paretoFrontSize": (status.pareto_front_size if status else None) or 0,
        "currentOptimalTrial": optimal.to_wire() if optimal else None,
    }


def text(experiment: Experiment) -> str:
    """One row per trial of the front: each objective's value (by its strategy), then the
    assignments; a first line says how many trials the front has and how it is ordered."""
    objective = experiment.spec.objective
    status = experiment.status
    assert objective is not None
    entries = (status.pareto_front if status else None) or []
    size = (status.pareto_front_size if status else None) or 0
    targets = multiobjective.targets(objective)
    names = [p.name for p in experiment.spec.parameters or []]
    headers = ["TRIAL", *(f"{m} ({kind})" for m, kind in targets), *names]
    rows = []
    for entry in entries:
        values = observations.objective_values(objective, entry.observation)
        assigned = {p.name: p.value for p in entry.parameter_assignments or []}
        rows.append(
            [
                entry.trial_name,
                *("-" if v is None else tables.readable(repr(v)) for v in values),
                *(tables.readable(str(assigned.get(n, "-"))) for n in names),
            ]
        )
    shown = f"{len(entries)} listed" if len(entries) < size else "all listed"
    head = (
        f"Pareto front: {size} trial(s), {shown}, best {targets[0][0]} first "
        f"(currentOptimalTrial: the best by {targets[0][0]})"
    )
    return head + "\n" + tables.render(headers, rows) if rows else head
