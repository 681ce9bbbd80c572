"""The algorithm's memory: one Optuna study per Suggestion, kept under the data directory.

Neighbours: `syncing` reads the cluster and calls `Search.catch_up` (replay status, tell finished
trials) and `Search.next_assignments`; `sampling` produces the points; `searchspaces` converts.

Every assignment is a study trial carrying its index in `status.suggestions` (user attribute
`kubetune_index`). The trial is stored BEFORE the status write, and a trial with an index at or
beyond the written list is re-used, not re-drawn, on the next pass: a crash between computing and
writing re-writes the same point under the same deterministic name. Assignments in the status
that the study lacks (a new pod without the old volume) are replayed into it. A finished Trial is
told once: only RUNNING study trials are told, and the study lives on the volume (FromVolume), so
a new pod continues the same study. The storage is Optuna's JournalStorage on a file (append-only,
safe on a crash mid-write); with no data directory the study is in memory.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from kubetune.algorithmsettings import Value
from kubetune.api.experiment import ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import indexed, sampling, searchspaces
from kubetune_suggestion_algorithm.outcomes import Outcome

log = logging.getLogger(__name__)

INDEX = "kubetune_index"
NAME = "kubetune_name"
SEED = "kubetune_seed"

optuna.logging.set_verbosity(optuna.logging.WARNING)


CaughtUp = tuple[tuple[tuple[str, bool], ...], frozenset[tuple[str, Outcome]]]
"""What one `Search.catch_up` was given: (name, has parameters) per assignment, the outcomes."""


def open_study(
    data_dir: Path | None, name: str, maximize: bool | Sequence[bool], seed: int | None
) -> optuna.Study:
    """The study `name`, created on first use; its seed is fixed at creation and stored.
    `maximize` per objective makes a multi-objective study (one direction each)."""
    storage: BaseStorage
    if data_dir is None:
        storage = InMemoryStorage()
    else:
        data_dir.mkdir(parents=True, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(str(data_dir / indexed.JOURNAL)))
    directions = [maximize] if isinstance(maximize, bool) else list(maximize)
    study = optuna.create_study(
        storage=storage,
        study_name=name,
        directions=["maximize" if up else "minimize" for up in directions],
        load_if_exists=True,
    )
    if SEED not in study.user_attrs:
        study.set_user_attr(
            SEED, seed if seed is not None else random.SystemRandom().randrange(2**31)
        )
    return study


class Search:
    """One algorithm on one study; all of its state is in the study."""

    def __init__(
        self,
        study: optuna.Study,
        algorithm: str,
        settings: dict[str, Value],
        parameters: Sequence[ParameterSpec],
        experiment: str,
    ) -> None:
        self.study = study
        self.algorithm = algorithm
        self.settings = settings
        self.parameters = list(parameters)
        self.experiment = experiment
        self.space = searchspaces.build(parameters)
        self.distributions = searchspaces.distributions(self.space)
        self.seed = int(study.user_attrs[SEED])
        self.exhausted = False
        self._caught_up: CaughtUp | None = None
        """What the last `catch_up` saw, while the study is as it left it: the same again has
        nothing to replay or tell (this process is the study's only writer), so it costs no read
        of the study."""

    # -- reading the study --------------------------------------------------------------------

    def _trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def by_index(self, trials: Sequence[FrozenTrial] | None = None) -> dict[int, FrozenTrial]:
        """The study trials by assignment index (`trials`: a snapshot already read)."""
        out: dict[int, FrozenTrial] = {}
        for trial in self._trials() if trials is None else trials:
            index = trial.user_attrs.get(INDEX)
            if isinstance(index, int) and index not in out and trial.state != TrialState.WAITING:
                out[index] = trial
        return out

    # -- catching up with the cluster -----------------------------------------------------------

    def _drain(self) -> list[FrozenTrial]:
        """Finish what a crash interrupted: ask enqueued trials, fail those without an index.
        Returns the study's trials afterwards (one read of the journal when nothing was left)."""
        trials = self._trials()
        changed = False
        while any(t.state == TrialState.WAITING for t in trials):
            self.study.ask(self.distributions)
            trials, changed = self._trials(), True
        seen: set[int] = set()
        for trial in sorted(trials, key=lambda t: t.number):
            index = trial.user_attrs.get(INDEX)
            if trial.state != TrialState.RUNNING:
                if isinstance(index, int):
                    seen.add(index)
                continue
            if not isinstance(index, int) or index in seen:
                log.info("study trial %d has no assignment; marking it failed", trial.number)
                self.study.tell(trial.number, state=TrialState.FAIL)
                changed = True
            else:
                seen.add(index)
        return self._trials() if changed else trials

    def catch_up(self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Outcome]) -> int:
        """Replay written assignments the study lacks, tell finished trials; returns #told."""
        seen = (
            tuple((a.name, a.parameter_assignments is not None) for a in assignments),
            frozenset(outcomes.items()),
        )
        if seen == self._caught_up:
            return 0
        self._caught_up = None  # an exception below leaves the study to be read again
        known = self.by_index(self._drain())
        replayed = False
        for index, assignment in enumerate(assignments):
            if index in known:
                continue
            values = {p.name: p.value for p in assignment.parameter_assignments or []}
            try:
                params = searchspaces.internal(self.space, values)
            except (KeyError, ValueError) as e:
                log.warning("assignment %s does not fit the search space: %s", assignment.name, e)
                continue
            self.study.enqueue_trial(params, user_attrs={INDEX: index, NAME: assignment.name})
            self.study.ask(self.distributions)
            replayed = True
            log.info("replayed assignment %s (index %d) into the study", assignment.name, index)
        told = 0
        for index, trial in sorted((self.by_index() if replayed else known).items()):
            if index >= len(assignments) or trial.state != TrialState.RUNNING:
                continue
            outcome = outcomes.get(assignments[index].name)
            if outcome is None:
                continue
            if outcome.value is None:
                self.study.tell(trial.number, state=TrialState.FAIL)
            else:
                self.study.tell(trial.number, outcome.told())
            told += 1
        self._caught_up = seen
        return told

    # -- new assignments ------------------------------------------------------------------------

    def _new_trial(self, index: int) -> dict[str, float | int | str] | None:
        """A new study trial for assignment `index`: its point (internal values), or None
        when the grid has none left."""
        self._caught_up = None  # the study changes: the next `catch_up` reads it again
        name = self.assignment_name(index)
        attrs = {INDEX: index, NAME: name}
        if self.algorithm == "grid":
            try:
                point = indexed.grid_point(self.parameters, self.seed, index)
            except indexed.GridExhausted:
                return None
            self.study.enqueue_trial(searchspaces.internal(self.space, point), user_attrs=attrs)
            trial = self.study.ask(self.distributions)
        elif self.algorithm == "bayesianoptimization":
            point = sampling.bayesian(
                self.space,
                self.settings,
                self._trials(),
                self.study.direction == optuna.study.StudyDirection.MAXIMIZE,
                1,
                self.seed,
            )[0]
            self.study.enqueue_trial(point, user_attrs=attrs)
            trial = self.study.ask(self.distributions)
        else:
            self.study.sampler = sampling.sampler(
                self.algorithm, self.settings, self.seed, len(self._trials())
            )
            trial = self.study.ask(self.distributions)
            trial.set_user_attr(INDEX, index)
            trial.set_user_attr(NAME, name)
        return dict(trial.params)

    def assignment_name(self, index: int) -> str:
        from kubetune import naming

        return naming.trial_name(self.experiment, str(index))

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]:
        """Assignments for indexes start..start+count-1: stored ones first, then new ones.

        Sets `exhausted` when the grid has no point left (fewer than `count` come back).
        """
        known = self.by_index() if count > 0 else {}
        out: list[TrialAssignment] = []
        for index in range(start, start + count):
            stored = known.get(index)
            params = stored.params if stored is not None else self._new_trial(index)
            if params is None:
                self.exhausted = True
                break
            values = searchspaces.external(self.space, params)
            out.append(indexed.assignment(self.experiment, index, self.parameters, values))
        if self.algorithm == "grid" and indexed.grid_handed_out(self.parameters, start + len(out)):
            self.exhausted = True
        return out
