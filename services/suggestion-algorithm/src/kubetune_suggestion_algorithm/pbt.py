"""Population based training (Jaderberg et al.) with the mechanics of Katib's pbt service.

Neighbours: `syncing` drives it through the interface of `studying.Search`; `searchspaces.draw`
draws random points; the checkpoint directories live under the algorithm's data directory (the
Suggestion's volume), where the pod webhook mounts each trial's own directory.

Mechanics (upstream's `PbtJobQueue`):
- generation 0: `n_population` random configurations;
- generation g+1, once every Trial of generation g has finished: the members' objective values
  (maximize: as is, minimize: negated) are cut at their `truncation_threshold` and
  `1 - truncation_threshold` quantiles (linear interpolation, numpy's default). A member below
  the lower cut is *exploited*: its successor takes the configuration of a random member at or
  above the upper cut and continues from that member's checkpoint. Every other member is
  *explored*: its successor continues from its own checkpoint with each parameter perturbed
  (int and double x0.8 or x1.2, clamped; list values move to a neighbour) or, with
  `resample_probability` set, redrawn with that probability. As upstream, the exploited ones are
  at most `int(n * truncation_threshold)` and the generation is at most `n` (the cuts may make
  it smaller).
- each Trial carries the labels `pbt.suggestion.katib.kubeflow.org/generation` and, from
  generation 1 on, `pbt.suggestion.katib.kubeflow.org/parent` (the Trial whose checkpoint it
  starts from); its checkpoint directory `<data dir>/<experiment>/<trial>` is created before the
  assignment is written: empty for generation 0, a copy of the parent's directory after.

Differences from upstream: the successor of an exploited member starts from the better member's
checkpoint (upstream copied the exploited member's own directory while taking the better one's
parameters, so it never exploited the better weights); a generation waits for the previous one
to finish (upstream mixed generations depending on when its controller asked), which makes the
schedule a pure function of the written assignments, the Trials' outcomes and the seed, so any
new algorithm pod continues the same run; a failed Trial ranks below every value (upstream
re-ran it, forever if it always fails).
"""

from __future__ import annotations

import logging
import math
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubetune import naming
from kubetune.algorithmsettings import Value
from kubetune.api.common import ParameterAssignment
from kubetune.api.experiment import ParameterSpec, ParameterType
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import searchspaces
from kubetune_suggestion_algorithm.outcomes import Outcome

log = logging.getLogger(__name__)

GENERATION_LABEL = "pbt.suggestion.katib.kubeflow.org/generation"
PARENT_LABEL = "pbt.suggestion.katib.kubeflow.org/parent"


@dataclass(frozen=True)
class Member:
    """One planned Trial: its point, generation and the Trial it continues from."""

    point: dict[str, str]
    generation: int
    parent: str | None = None


def quantile(values: Sequence[float], q: float) -> float:
    """numpy's default (linear) quantile of a non-empty list."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text not in (None, "") else default
    except ValueError:
        return default


def perturb(parameter: ParameterSpec, value: str, rng: random.Random) -> str:
    """Upstream's perturbation: numbers x0.8 or x1.2 within [min, max], lists a neighbour."""
    space = parameter.feasible_space
    if parameter.parameter_type in (ParameterType.INT, ParameterType.DOUBLE):
        low, high = _number(space.min, -math.inf), _number(space.max, math.inf)
        factor = rng.choice((0.8, 1.2))
        if parameter.parameter_type == ParameterType.INT:
            return str(int(max(low, min(high, int(int(float(value)) * factor)))))
        number = max(low, min(high, float(value) * factor))
        step = _number(space.step, 0.0)
        if step > 0:
            number = min(high, low + round((number - low) / step) * step)
            return searchspaces.format_float(number)
        return repr(number)
    values = list(space.values or [])
    position = values.index(value) + rng.choice((-1, 1)) if value in values else 0
    return values[position % len(values)]


class Pbt:
    """The algorithm over one Experiment; its state is the written assignments and outcomes."""

    def __init__(
        self,
        settings: dict[str, Value],
        parameters: Sequence[ParameterSpec],
        experiment: str,
        maximize: bool,
        seed: int,
        data_dir: Path | None,
    ) -> None:
        self.parameters = list(parameters)
        self.space = searchspaces.build(parameters)
        self.experiment = experiment
        self.maximize = maximize
        self.seed = seed
        population = settings.get("n_population")
        threshold = settings.get("truncation_threshold")
        resample = settings.get("resample_probability")
        self.population = population if isinstance(population, int) else 5
        self.threshold = float(threshold) if isinstance(threshold, int | float) else 0.2
        self.resample = float(resample) if isinstance(resample, int | float) else None
        self.trial_root = None if data_dir is None else data_dir / experiment
        self.exhausted = False
        self.assignments: list[TrialAssignment] = []
        self.outcomes: dict[str, Outcome] = {}

    def assignment_name(self, index: int) -> str:
        return naming.trial_name(self.experiment, str(index))

    def catch_up(self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Outcome]) -> int:
        self.assignments = list(assignments)
        self.outcomes = dict(outcomes)
        return 0

    # -- the plan ---------------------------------------------------------------------------

    def _random(self, index: int) -> dict[str, str]:
        params = searchspaces.draw(self.space, random.Random(f"{self.seed}/{index}"))
        return searchspaces.external(self.space, params)

    def _written(self, index: int) -> dict[str, str] | None:
        listed = self.assignments[index].parameter_assignments
        return None if listed is None else {p.name: p.value for p in listed}

    def _scores(self, first: int, size: int) -> list[float] | None:
        """The members' scores (higher is better, failed = -inf), None while one runs."""
        if first + size > len(self.assignments):
            return None
        scores = []
        for index in range(first, first + size):
            outcome = self.outcomes.get(self.assignments[index].name)
            if outcome is None:
                return None
            value = outcome.value
            scores.append(-math.inf if value is None else (value if self.maximize else -value))
        return scores

    def _cut(self, scores: list[float]) -> tuple[list[int], list[int], list[int]]:
        """(exploited, explored, upper) member positions, before upstream's truncation."""
        finite = [s for s in scores if s != -math.inf]
        if not finite:  # every member failed: nothing better to copy, each explores on
            return [], list(range(len(scores))), []
        low = quantile(finite, self.threshold)
        high = quantile(finite, 1 - self.threshold)
        exploit = [k for k, s in enumerate(scores) if s < low]
        explore = [k for k, s in enumerate(scores) if s >= low]
        upper = [k for k, s in enumerate(scores) if s >= high]
        return exploit, explore, upper

    def _size_after(self, scores: list[float]) -> int:
        exploit, explore, _ = self._cut(scores)
        kept = min(len(exploit), int(self.population * self.threshold))
        return kept + min(len(explore), self.population - kept)

    def _derive(self, generation: int, first: int, scores: list[float]) -> list[Member]:
        """Generation+1 from the finished members of `generation` starting at `first`."""
        names = [self.assignments[first + k].name for k in range(len(scores))]
        points = [self._written(first + k) or {} for k in range(len(scores))]
        rng = random.Random(f"{self.seed}/generation/{generation + 1}")
        exploit, explore, upper = self._cut(scores)
        rng.shuffle(exploit)
        rng.shuffle(explore)
        exploit = exploit[: int(self.population * self.threshold)]
        explore = explore[: self.population - len(exploit)]
        members: list[Member] = []
        for _ in exploit:
            better = rng.choice(upper)
            members.append(Member(dict(points[better]), generation + 1, names[better]))
        for k in explore:
            point = {}
            for parameter in self.parameters:
                old = points[k].get(parameter.name, "")
                if self.resample is None:
                    point[parameter.name] = perturb(parameter, old, rng)
                elif rng.random() < self.resample:
                    point[parameter.name] = self._random_value(parameter.name, rng)
                else:
                    point[parameter.name] = old
            members.append(Member(point, generation + 1, names[k]))
        return members

    def _random_value(self, name: str, rng: random.Random) -> str:
        dimension = next(d for d in self.space if d.name == name)
        return dimension.to_external(searchspaces.draw([dimension], rng)[name])

    def plan(self, start: int, until: int) -> dict[int, Member]:
        """The members of slots start..until-1 that can be known now.

        Generation boundaries come from the scores alone (cheap); only a generation with a
        slot in the range is derived in full, so a pass costs one generation, not the run."""
        generations = [(0, self.population)]
        while generations[-1][0] + generations[-1][1] < until:
            first, size = generations[-1]
            scores = self._scores(first, size)
            if scores is None:
                break
            following = self._size_after(scores)
            if following == 0:
                break
            generations.append((first + size, following))
        members: dict[int, Member] = {}
        for generation, (first, size) in enumerate(generations):
            if first + size <= start or first >= until:
                continue
            if generation == 0:
                derived = [Member(self._random(i), 0) for i in range(size)]
            else:
                previous_first, previous_size = generations[generation - 1]
                scores = self._scores(previous_first, previous_size)
                assert scores is not None
                derived = self._derive(generation - 1, previous_first, scores)
            for k, member in enumerate(derived):
                if start <= first + k < until:
                    members[first + k] = member
        return members

    # -- new assignments --------------------------------------------------------------------

    def _prepare(self, name: str, parent: str | None) -> None:
        """The Trial's checkpoint directory: empty, or a copy of its parent's (world-writable:
        the trial pods' user is not known here)."""
        if self.trial_root is None:
            return
        target = self.trial_root / name
        if target.exists():
            shutil.rmtree(target)
        source = None if parent is None else self.trial_root / parent
        if source is not None and source.is_dir():
            shutil.copytree(source, target)
        else:
            if source is not None:
                log.warning("no checkpoint directory %s; %s starts empty", source, name)
            target.mkdir(parents=True)
        for path in [target, *target.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o666)

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]:
        members = self.plan(start, start + count)
        out: list[TrialAssignment] = []
        for index in range(start, start + count):
            member = members.get(index)
            if member is None:
                break  # the next generation waits for this one to finish
            name = self.assignment_name(index)
            labels = {GENERATION_LABEL: str(member.generation)}
            if member.parent is not None:
                labels[PARENT_LABEL] = member.parent
            self._prepare(name, member.parent)
            out.append(
                TrialAssignment(
                    name=name,
                    parameter_assignments=[
                        ParameterAssignment(name=p.name, value=member.point[p.name])
                        for p in self.parameters
                    ],
                    labels=labels,
                )
            )
        return out
