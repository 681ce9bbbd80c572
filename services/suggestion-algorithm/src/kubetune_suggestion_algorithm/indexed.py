"""Random and grid search without a study: assignment i is a pure function of (space, seed, i).

Neither algorithm learns from results, so neither needs Optuna's study or its journal: the
process starts without importing Optuna or NumPy, keeps no state, and any pod (any resume
policy, with or without its volume) hands out exactly the points a previous one would have.
A crash between computing and writing gives the same point again under the same name.

- random: `searchspaces.draw` from `random.Random(f"{seed}/{i}")`: uniform in each parameter's
  internal space, distribution and step honoured (as Optuna's RandomSampler draws); points
  may repeat on a discrete space, as they do in Katib.
- grid: the cartesian product of `kubetune.algorithmsettings.grid_axis`, in an order shuffled by
  the seed (as Optuna's GridSampler does): the point of index i is its place in a seeded
  bijection (`permuting`), so nothing is listed, any grid size costs O(parameters) per point,
  and the end of the grid is exact (`GridExhausted`).

A volume that already holds a study journal (an Experiment started before this module, or one
with warm start) keeps its study (`algorithms.build` decides).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from kubetune import algorithmsettings, naming
from kubetune.api.common import ParameterAssignment
from kubetune.api.experiment import ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import permuting, searchspaces
from kubetune_suggestion_algorithm.outcomes import Outcome

ALGORITHMS = ("random", "grid")
JOURNAL = "study.journal"
"""The file of a study's journal under the data directory (`studying`)."""


class GridExhausted(Exception):
    """Every point of the grid has been handed out."""


def grid_point(parameters: Sequence[ParameterSpec], seed: int, index: int) -> dict[str, str]:
    """The `index`-th point of the shuffled grid (Katib text values), computed from `index`
    alone: its place in the seeded shuffle (`permuting`), read as a mixed-radix number whose
    digits (last parameter fastest) pick each parameter's value.

    Raises:
        GridExhausted: index ≥ the number of grid points.
        ValueError: a parameter has no finite grid (`algorithmsettings.validate` says so first).
    """
    axes = []
    for parameter in parameters:
        axis = algorithmsettings.grid_axis(parameter)
        if axis is None:
            raise ValueError(f"parameter {parameter.name} has no finite grid")
        axes.append(axis)
    size = math.prod(axis.count for axis in axes)
    if index >= size:
        raise GridExhausted(f"all {size} grid points are assigned")
    flat = permuting.permute(index, size, seed)
    point: dict[str, str] = {}
    for axis in reversed(axes):
        flat, position = divmod(flat, axis.count)
        point[axis.name] = axis.value(position)
    return {p.name: point[p.name] for p in parameters}


def assignment(
    experiment: str, index: int, parameters: Sequence[ParameterSpec], values: dict[str, str]
) -> TrialAssignment:
    """Assignment `index`: its deterministic Trial name, the values in the parameters' order."""
    return TrialAssignment(
        name=naming.trial_name(experiment, str(index)),
        parameter_assignments=[
            ParameterAssignment(name=p.name, value=values[p.name]) for p in parameters
        ],
    )


def grid_handed_out(parameters: Sequence[ParameterSpec], count: int) -> bool:
    """Whether `count` assignments are every point of the grid."""
    return count >= algorithmsettings.grid_size(parameters)


class IndexedSearch:
    """Random or grid over one Experiment; it has no state beyond `exhausted`."""

    def __init__(
        self, algorithm: str, parameters: Sequence[ParameterSpec], experiment: str, seed: int
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm {algorithm} is not one of {', '.join(ALGORITHMS)}")
        self.algorithm = algorithm
        self.parameters = list(parameters)
        self.space = searchspaces.build(parameters)
        self.experiment = experiment
        self.seed = seed
        self.exhausted = False

    def catch_up(self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Outcome]) -> int:
        """Nothing to learn: neither algorithm looks at results."""
        return 0

    def point(self, index: int) -> dict[str, str]:
        """Raises GridExhausted past the end of the grid."""
        if self.algorithm == "grid":
            return grid_point(self.parameters, self.seed, index)
        drawn = searchspaces.draw(self.space, random.Random(f"{self.seed}/{index}"))
        return searchspaces.external(self.space, drawn)

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]:
        """Assignments for indexes start..start+count-1; fewer (and `exhausted`) at the end of
        the grid."""
        out: list[TrialAssignment] = []
        for index in range(start, start + count):
            try:
                values = self.point(index)
            except GridExhausted:
                self.exhausted = True
                break
            out.append(assignment(self.experiment, index, self.parameters, values))
        if self.algorithm == "grid" and grid_handed_out(self.parameters, start + len(out)):
            self.exhausted = True
        return out
