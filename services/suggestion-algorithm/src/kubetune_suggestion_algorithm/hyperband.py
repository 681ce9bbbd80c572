"""Hyperband (Li et al.) with the brackets and rungs of Katib's hyperband service.

Neighbours: `syncing` drives it through the same interface as `studying.Search` (`catch_up`,
`next_assignments`, `exhausted`); `searchspaces` converts the points.

The schedule is a pure function of the settings (`schedule`), computed with upstream's formulas
(upstream `HyperBandParam` and `_make_*_bracket`):

- `s_max = int(log(r_l) / log(eta))`; brackets `s = s_max, s_max-1, ..., 0`, in that order;
- bracket `s` starts with `n = ceil((s_max+1) * eta**s / (s+1))` new random configurations at
  resource `int(r_l * eta**-s)` (rung 0);
- its rung `i` (1..s) keeps the best `ceil(ceil(n * eta**-(i-1)) / eta)` trials of rung `i-1`
  and runs them again at resource `int(int(r_l * eta**-s) * eta**i)` (upstream stores `r` as a
  float and reads it back with `int()`, so later rungs multiply the truncated value);
- the next bracket's rung 0 may start as soon as the previous bracket's last rung is handed out
  (upstream's `evaluating_trials = 0` there), only a rung `i ≥ 1` waits for rung `i-1` to end.

Assignment `k` of the Suggestion is slot `k` of the schedule, so all of the state is in the
Suggestion's `status.suggestions` and the Trials' outcomes: a new algorithm pod (any resume
policy, with or without its volume) continues exactly where the old one stopped. Random points
are drawn from `random.Random(f"{seed}/{k}")`, so a crash between computing and writing gives
the same point again. The resource parameter carries the rung's resource as an integer, whatever
its feasible space says (as upstream).

Differences from upstream, each where upstream stalls or errs:
- rung 0 has the `n` configurations of the formula; upstream overwrote `n` with the request
  count of the moment (a "hack" in its code) and then returned fewer assignments than requested
  in later rungs, which its controller refuses forever (kubeflow/katib#1168);
- a finished Trial without a value (Failed, MetricsUnavailable) ranks below every value instead
  of blocking the bracket forever; an EarlyStopped Trial with a value counts with that value;
- after the last bracket the search is exhausted (`search_exhausted`), so the Experiment ends
  Succeeded instead of waiting on an algorithm that has nothing left to give;
- random points honour each parameter's distribution and step (upstream drew uniformly).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from kubetune import algorithmsettings, naming
from kubetune.algorithmsettings import Value
from kubetune.api.common import ParameterAssignment
from kubetune.api.experiment import ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import searchspaces
from kubetune_suggestion_algorithm.outcomes import Outcome


@dataclass(frozen=True)
class Rung:
    """One rung of one bracket: `size` trials at `resource`; `first` = its first slot."""

    bracket: int
    rung: int
    size: int
    resource: int
    first: int


def schedule(eta: float, r_l: float) -> list[Rung]:
    """Every rung of every bracket, in the order upstream hands them out."""
    s_max = algorithmsettings.hyperband_s_max(eta, r_l)
    rungs: list[Rung] = []
    first = 0
    for s in range(s_max, -1, -1):
        n = math.ceil(float(s_max + 1) * (float(eta**s) / float(s + 1)))
        r = int(r_l * eta ** (-s))
        for i in range(s + 1):
            size = n if i == 0 else math.ceil(math.ceil(n * eta ** (-(i - 1))) / eta)
            resource = r if i == 0 else int(r * eta**i)
            rungs.append(Rung(s, i, size, resource, first))
            first += size
    return rungs


class Hyperband:
    """The algorithm over one Experiment; its state is the written assignments and outcomes."""

    def __init__(
        self,
        settings: dict[str, Value],
        parameters: Sequence[ParameterSpec],
        experiment: str,
        maximize: bool,
        seed: int,
    ) -> None:
        self.parameters = list(parameters)
        self.space = searchspaces.build(parameters)
        self.experiment = experiment
        self.maximize = maximize
        self.seed = seed
        self.resource_name = str(settings["resource_name"])
        r_l = settings["r_l"]
        self.rungs = schedule(
            algorithmsettings.hyperband_eta(settings.get("eta")),
            float(r_l) if isinstance(r_l, int | float) else 1.0,
        )
        self.total = sum(r.size for r in self.rungs)
        self.exhausted = False
        self.assignments: list[TrialAssignment] = []
        self.outcomes: dict[str, Outcome] = {}

    def catch_up(self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Outcome]) -> int:
        """Take the written assignments and the finished Trials; returns #outcomes known."""
        self.assignments = list(assignments)
        self.outcomes = dict(outcomes)
        self.exhausted = len(self.assignments) >= self.total
        return 0

    def rung_of(self, index: int) -> Rung | None:
        for rung in self.rungs:
            if rung.first <= index < rung.first + rung.size:
                return rung
        return None

    def assignment_name(self, index: int) -> str:
        return naming.trial_name(self.experiment, str(index))

    def _values(self, index: int) -> dict[str, str] | None:
        if index >= len(self.assignments):
            return None
        listed = self.assignments[index].parameter_assignments
        return None if listed is None else {p.name: p.value for p in listed}

    def _ranked(self, rung: Rung) -> list[int] | None:
        """Slots of `rung` best first, or None while one of its Trials has not finished."""
        scored: list[tuple[int, float, int]] = []
        for index in range(rung.first, rung.first + rung.size):
            if index >= len(self.assignments):
                return None
            outcome = self.outcomes.get(self.assignments[index].name)
            if outcome is None:
                return None
            if outcome.value is None:
                scored.append((1, 0.0, index))
            else:
                scored.append((0, -outcome.value if self.maximize else outcome.value, index))
        return [index for _, _, index in sorted(scored)]

    def _point(self, index: int, rung: Rung) -> dict[str, str] | None:
        if rung.rung == 0:
            params = searchspaces.draw(self.space, random.Random(f"{self.seed}/{index}"))
            point = searchspaces.external(self.space, params)
        else:
            previous = self.rungs[self.rungs.index(rung) - 1]
            ranked = self._ranked(previous)
            if ranked is None:
                return None  # rung i waits for every Trial of rung i-1
            chosen = self._values(ranked[index - rung.first])
            if chosen is None:
                return None
            point = dict(chosen)
        point[self.resource_name] = str(rung.resource)
        return point

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]:
        """Assignments for slots start.. as far as the schedule allows now (maybe none)."""
        out: list[TrialAssignment] = []
        for index in range(start, start + count):
            rung = self.rung_of(index)
            if rung is None:
                self.exhausted = True
                break
            point = self._point(index, rung)
            if point is None:
                break
            out.append(
                TrialAssignment(
                    name=self.assignment_name(index),
                    parameter_assignments=[
                        ParameterAssignment(name=p.name, value=point[p.name])
                        for p in self.parameters
                    ],
                )
            )
        if start + len(out) >= self.total:
            self.exhausted = True
        return out
