"""One pass of the algorithm process: read Suggestion, Experiment and Trials, write assignments.

Neighbours: `main` runs `Syncer.sync` whenever a watched object changes (and periodically);
`studying` holds the algorithm's state. The only write is one merge patch of the Suggestion's
status subresource carrying `metadata.resourceVersion` (optimistic concurrency) and only the
fields this process owns (contract): `suggestions`, `suggestionCount` (same patch, so they never
disagree) and `algorithmSettings`. A Conflict means another writer came first: re-read, retry.

Invalid settings never crash the process: the problem is logged once and the pass waits for the
Suggestion to change (the suggestion-controller marks it Failed with the same problems).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kubetune import algorithmsettings, conditions, errors, naming, observations
from kubetune.algorithmsettings import Value
from kubetune.api.common import AlgorithmSetting, ObjectiveType
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion
from kubetune.api.trial import Trial
from kubetune.conditions import SuggestionCondition, TrialCondition
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube, Obj
from kubetune_suggestion_algorithm import studying

log = logging.getLogger(__name__)


def outcome(experiment: Experiment, trial: Trial) -> studying.Outcome | None:
    """What a Trial tells the algorithm, or None while it has nothing to tell (upstream: only
    Succeeded/EarlyStopped with an objective value teach; other endings are failures; an early
    stopped Trial without observation stays hidden until its metrics arrive)."""
    status = trial.status
    conds = status.conditions if status else None
    objective = experiment.spec.objective or trial.spec.objective
    observation = status.observation if status else None
    value = observations.objective_value(objective, observation) if objective else None
    if conditions.is_true(conds, TrialCondition.EARLY_STOPPED):
        return studying.Outcome(value) if value is not None else None
    if conditions.is_true(conds, TrialCondition.SUCCEEDED):
        return studying.Outcome(value)
    if any(
        conditions.is_true(conds, c)
        for c in (TrialCondition.FAILED, TrialCondition.KILLED, TrialCondition.METRICS_UNAVAILABLE)
    ):
        return studying.Outcome(None)
    return None


def status_settings(
    current: Sequence[AlgorithmSetting] | None, exhausted: bool
) -> list[AlgorithmSetting]:
    kept = [s for s in current or () if s.name != algorithmsettings.SEARCH_EXHAUSTED]
    if exhausted:
        kept.append(AlgorithmSetting(name=algorithmsettings.SEARCH_EXHAUSTED, value="true"))
    return kept


@dataclass
class Syncer:
    kube: Kube
    namespace: str
    name: str
    algorithm: str
    data_dir: Path | None
    search: studying.Search | None = None
    search_key: str = ""
    last_problem: str = ""
    passes: int = 0
    writes: list[int] = field(default_factory=list)

    def _search(
        self, experiment: Experiment, algorithm: str, settings: dict[str, Value]
    ) -> studying.Search:
        key = json.dumps(
            [
                experiment.metadata.uid,
                algorithm,
                settings,
                [p.to_wire() for p in experiment.spec.parameters or []],
            ],
            sort_keys=True,
            default=str,
        )
        if self.search is None or key != self.search_key:
            objective = experiment.spec.objective
            maximize = objective is not None and objective.type == ObjectiveType.MAXIMIZE
            seed = settings.get("random_state")
            study = studying.open_study(
                self.data_dir,
                f"{self.namespace}.{self.name}.{experiment.metadata.uid}",
                maximize,
                seed if isinstance(seed, int) else None,
            )
            self.search = studying.Search(
                study,
                algorithm,
                settings,
                experiment.spec.parameters or [],
                experiment.metadata.name or self.name,
            )
            self.search_key = key
        return self.search

    def sync(self, trial_objects: Iterable[Obj]) -> bool:
        """One pass; True when it wrote (so another pass may have more to do)."""
        self.passes += 1
        raw = self.kube.get_or_none(SUGGESTIONS, self.name, self.namespace)
        experiment_raw = self.kube.get_or_none(EXPERIMENTS, self.name, self.namespace)
        if raw is None or experiment_raw is None:
            log.info("waiting for Suggestion and Experiment %s/%s", self.namespace, self.name)
            return False
        suggestion = Suggestion.model_validate(raw)
        experiment = Experiment.model_validate(experiment_raw)
        status = suggestion.status
        if status is not None and conditions.is_true(status.conditions, SuggestionCondition.FAILED):
            return False
        spec_algorithm = suggestion.spec.algorithm or experiment.spec.algorithm
        algorithm = (spec_algorithm.algorithm_name if spec_algorithm else "") or self.algorithm
        if algorithm != self.algorithm:
            log.warning(
                "Suggestion asks for %s, this process was started for %s; using %s",
                algorithm,
                self.algorithm,
                algorithm,
            )
        settings_list = spec_algorithm.algorithm_settings if spec_algorithm else None
        parameters = experiment.spec.parameters or []
        problems = algorithmsettings.validate(algorithm, settings_list, parameters)
        if problems:
            problem = "; ".join(problems)
            if problem != self.last_problem:
                log.error("invalid algorithm settings, waiting for a change: %s", problem)
                self.last_problem = problem
            return False
        self.last_problem = ""
        settings = algorithmsettings.parse(algorithm, settings_list, parameters)
        search = self._search(experiment, algorithm, settings)

        outcomes: dict[str, studying.Outcome] = {}
        for obj in trial_objects:
            trial = Trial.model_validate(obj)
            result = outcome(experiment, trial)
            if result is not None and trial.metadata.name:
                outcomes[trial.metadata.name] = result
        assignments = list((status.suggestions if status else None) or [])
        told = search.catch_up(assignments, outcomes)
        if told:
            log.info("told %d finished trials to the study", told)

        requests = suggestion.spec.requests or 0
        new = search.next_assignments(len(assignments), requests - len(assignments))
        current_settings = status.algorithm_settings if status else None
        settings_out = status_settings(current_settings, search.exhausted)
        if not new and [s.to_wire() for s in settings_out] == [
            s.to_wire() for s in current_settings or []
        ]:
            return False
        if search.exhausted and not algorithmsettings.search_exhausted(current_settings):
            log.info(
                "the search space is exhausted after %d assignments", len(assignments) + len(new)
            )
        every = assignments + new
        patch = {
            "metadata": {"resourceVersion": suggestion.metadata.resource_version},
            "status": {
                "suggestions": [a.to_wire() for a in every],
                "suggestionCount": len(every),
                "algorithmSettings": [s.to_wire() for s in settings_out],
            },
        }
        try:
            self.kube.patch(SUGGESTIONS, self.name, patch, self.namespace, subresource="status")
        except errors.Conflict:
            log.info("Suggestion changed while computing; re-reading")
            return True
        self.writes.append(len(new))
        if new:
            log.info("assigned %s", ", ".join(a.name for a in new))
        return True


def trial_selector(experiment: str) -> str:
    return f"{naming.LABEL_EXPERIMENT}={naming.label_value(experiment)}"
